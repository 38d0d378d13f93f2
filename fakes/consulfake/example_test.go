package consulfake_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/locks/consullock"
)

// Start miniconsul in manual time without a test, take a lock, end its lease from
// outside through the fakes.Server control (ExpireLock), and take it again.
func Example() {
	ctx := context.Background()
	srv, err := consulfake.Start(consulfake.ManualTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	l, err := consullock.New(srv.Client(), "orders", srv.LockOptions()...)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Consul keeps an expired session's keys for a lock-delay: wait it out.
	faketest.ExpireAndRetake(ctx, srv, l, "orders", func() { srv.Advance(time.Minute) })
	// Output:
	// expired: <nil>
	// again, nobody holds it: true
	// taken again: <nil>
}
