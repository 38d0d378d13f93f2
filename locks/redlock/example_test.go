package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redlock"
)

// Three independent Redis servers (here miniredis), one client each: the
// lock is held while two of them record it.
func Example() {
	var clients []redis.UniversalClient
	for range 3 {
		srv, err := miniredis.Run()
		if err != nil {
			fmt.Println(err)
			return
		}
		defer srv.Close()
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer c.Close()
		clients = append(clients, c)
	}
	locker, err := redlock.New(clients, "nightly-report", locks.WithTTL(5*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	lease, err := locker.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, fenced := lease.Token()
	fmt.Printf("held on %d of %d nodes; fencing token: %v\n", locker.Quorum(), len(clients), fenced)

	_, err = locker.TryLock(ctx)
	fmt.Println("second TryLock locked out:", errors.Is(err, locks.ErrLocked))

	if err := lease.Unlock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("released")
	// Output:
	// held on 2 of 3 nodes; fencing token: false
	// second TryLock locked out: true
	// released
}
