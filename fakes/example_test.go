package fakes_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
)

// A MemLock on a manual clock: the first lease runs out of TTL when the
// clock passes it, and the next grant has a higher fencing token.
func ExampleMemLock() {
	ctx := context.Background()
	clock := fakes.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	lock, err := fakes.NewMemLock("orders",
		locks.WithClock(clock), locks.WithTTL(time.Second), locks.WithWatchdog(false))
	if err != nil {
		fmt.Println(err)
		return
	}

	first, err := lock.TryLock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	tok, _ := first.Token()
	fmt.Println("first token:", tok)

	_, err = lock.TryLock(ctx)
	fmt.Println("while held:", errors.Is(err, locks.ErrLocked))

	clock.Advance(time.Second)
	<-first.Done()
	fmt.Println("first lease:", first.Err())

	second, err := lock.TryLock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	tok, _ = second.Token()
	fmt.Println("second token:", tok)
	fmt.Println("unlock:", second.Unlock(ctx))
	// Output:
	// first token: 1
	// while held: true
	// first lease: lock "orders": locks: lease expired
	// second token: 2
	// unlock: <nil>
}

// A ZooKeeper server without a test (zkfake.New(t) in a test): minizk
// on a manual clock, where a session expires when the clock passes its
// timeout, and its ephemeral node with it.
