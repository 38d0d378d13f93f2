package etcdfake_test

import (
	"context"
	"fmt"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/locks/etcdlock"
)

// Start a one-member embedded etcd without a test, take a lock, end its lease from
// outside through the fakes.Server control (ExpireLock), and take it again.
func Example() {
	ctx := context.Background()
	srv, err := etcdfake.Start()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	l, err := etcdlock.New(srv.Client(), "orders", srv.LockOptions()...)
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
