package zkfake_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks/zklock"
)

// Start minizk in manual time without a test, take a lock, end its lease from
// outside through the fakes.Server control, and take it again.
func Example() {
	ctx := context.Background()
	srv, err := zkfake.Start(zkfake.ManualTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	connect := func() (*zklock.Locker, func() error) {
		conn, _, err := srv.Connect(4 * time.Second)
		if err != nil {
			fmt.Println(err)
			return nil, nil
		}
		l, err := zklock.New(conn, "orders", srv.LockOptions()...)
		if err != nil {
			fmt.Println(err)
		}
		return l, func() error { conn.Close(); return nil }
	}
	var server fakes.Server = srv
	holder, crash := connect()
	if holder == nil {
		return
	}
	held, err := holder.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("expired:", server.ExpireLock(ctx, "orders"))
	// The holder's lease learns it when its connection is told the session
	// expired (go-zookeeper reconnects after about a second). A lease whose
	// watch failed as the server cut the connection retries after a pause
	// on the lock's clock, the manual one here: move it on a little while
	// waiting, as a test in manual time does.
	ended := false
	for waited := 0; !ended && waited < 100; waited++ {
		select {
		case <-held.Done():
			ended = true
		case <-time.After(100 * time.Millisecond):
			if err := srv.AdvanceTime(20 * time.Millisecond); err != nil {
				fmt.Println(err)
				return
			}
		}
	}
	if !ended {
		fmt.Println("the holder's lease did not end")
	}
	_ = crash() // the holder's session is over: its process goes away
	err = server.ExpireLock(ctx, "orders")
	fmt.Println("again, nobody holds it:", errors.Is(err, fakes.ErrNoHolder))
	next, done := connect()
	if next == nil {
		return
	}
	defer done()
	lease, err := next.TryLock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("taken again:", lease.Unlock(ctx))
	// Output:
	// expired: <nil>
	// again, nobody holds it: true
	// taken again: <nil>
}
