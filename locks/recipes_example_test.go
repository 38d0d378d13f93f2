package locks_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
)

// A job that takes its lock again while it holds it (a helper called under
// the lock) gets a second hold on the same acquisition: the same token.
// The lock is free once both holds are unlocked.
func ExampleWithOwner() {
	ctx := context.Background()
	l, _ := fakes.NewMemLock("report", locks.WithOwner("job-7"))
	outer, _ := l.Lock(ctx)
	inner, _ := l.TryLock(ctx) // re-entry: no wait
	t1, _ := outer.Token()
	t2, _ := inner.Token()
	fmt.Println("tokens:", t1, t2)

	_ = inner.Unlock(ctx)
	fmt.Println("outer still held:", outer.Err() == nil)
	_ = outer.Unlock(ctx)

	next, _ := l.TryLock(ctx) // a new acquisition
	t3, _ := next.Token()
	fmt.Println("next token:", t3)
	_ = next.Unlock(ctx)
	// Output:
	// tokens: 1 1
	// outer still held: true
	// next token: 2
}

// A lease with a max hold ends at it even while the watchdog would keep it:
// Done closes with ErrMaxHold, then the lock is released.
func ExampleWithMaxHold() {
	clock := fakes.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l, _ := fakes.NewMemLock("report", locks.WithClock(clock), locks.WithTTL(10*time.Second),
		locks.WithMaxHold(2*time.Second))
	lease, _ := l.TryLock(context.Background())

	clock.Advance(2 * time.Second)
	err := lease.Renew(context.Background())
	<-lease.Done()
	fmt.Println(errors.Is(err, locks.ErrMaxHold), errors.Is(lease.Err(), locks.ErrMaxHold))
	fmt.Println(errors.Is(lease.Unlock(context.Background()), locks.ErrMaxHold))
	// Output:
	// true true
	// true
}
