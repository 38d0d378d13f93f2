package mysqlfake_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/mysqlfake"
	"github.com/lockproof/lockproof/locks/mysqllock"
)

// Start go-mysql-server in manual time without a test, take a lock, end its lease from
// outside through the fakes.Server control (ExpireLock), and take it again.
func Example() {
	ctx := context.Background()
	srv, err := mysqlfake.Start(mysqlfake.ManualTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	if err := mysqllock.CreateTable(ctx, srv.DB(), mysqllock.DefaultTable); err != nil {
		fmt.Println(err)
		return
	}
	l, err := mysqllock.New(srv.DB(), "orders", srv.LockOptions()...)
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
