package redisfake_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks/redislock"
)

// Start miniredis in manual time without a test, take a lock, end its lease from
// outside through the fakes.Server control (ExpireLock), and take it again.
func Example() {
	ctx := context.Background()
	srv, err := redisfake.Start(redisfake.ManualTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	l, err := redislock.New(srv.Client(), "orders", srv.LockOptions()...)
	if err != nil {
		fmt.Println(err)
		return
	}
	faketest.ExpireAndRetake(ctx, srv, l, "orders", nil)
	// Output:
	// expired: <nil>
	// again, nobody holds it: true
	// taken again: <nil>
}
