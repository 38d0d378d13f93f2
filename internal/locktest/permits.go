package locktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// AtMostPermits has goroutines goroutines per Locker of lockers take a
// permit and give it back rounds times each, alternating Lock and TryLock
// (a call refused with locks.ErrLocked skips its round), each holding it for
// hold of wall time. It fails t if more than permits were inside at once
// or a call failed otherwise, and returns the most that were inside at once.
func AtMostPermits(t testing.TB, permits int, lockers []locks.Locker, goroutines, rounds int, hold time.Duration) int {
	t.Helper()
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, len(lockers)*goroutines)
	for _, l := range lockers {
		for range goroutines {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				for i := range rounds {
					acquire := l.Lock
					if i%2 == 1 {
						acquire = l.TryLock
					}
					lease, err := acquire(ctx)
					if errors.Is(err, locks.ErrLocked) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					n := inside.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(hold)
					inside.Add(-1)
					if err := lease.Unlock(ctx); err != nil {
						errs <- fmt.Errorf("unlock: %w", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if m := int(most.Load()); m > permits {
		t.Fatalf("%d holders at once, permits %d", m, permits)
	}
	return int(most.Load())
}

// RefusesBadPermits checks that a semaphore's constructor, newSemaphore,
// refuses 0 and -1 permits with locks.ErrInvalidOption.
func RefusesBadPermits(t testing.TB, newSemaphore func(permits int) error) {
	t.Helper()
	for _, n := range []int{0, -1} {
		if err := newSemaphore(n); !errors.Is(err, locks.ErrInvalidOption) {
			t.Errorf("%d permits: %v, want ErrInvalidOption", n, err)
		}
	}
}

// LostPermitHarmless checks a holder that lost its permit on the backend
// and the holders that still hold theirs: the lost lease's Done closes
// with an error wrapping locks.ErrNotHeld, its Unlock says ErrNotHeld, and
// every holder still renews (the stale Unlock touched no other permit)
// before it unlocks.
func LostPermitHarmless(t testing.TB, lost locks.Lease, holders ...locks.Lease) {
	t.Helper()
	Closed(t, "the lost holder's Done", lost.Done())
	if err := lost.Err(); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("the lost lease's Err = %v, want ErrNotHeld", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), LockTimeout)
	defer cancel()
	if err := lost.Unlock(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Unlock after the loss: %v, want ErrNotHeld", err)
	}
	for _, h := range holders {
		if err := h.Renew(ctx); err != nil {
			t.Fatalf("a holder lost its permit to a stale unlock: %v", err)
		}
		UnlockOnce(t, h)
	}
}

// WaitersInTurn checks a semaphore of two permits, held by a and b, with
// two waiters queued in this order, first and second (LockAsync): a's
// Unlock hands a permit to the first waiter while the second still waits,
// b's to the second, whose token is above the first's. It unlocks both.
func WaitersInTurn(t testing.TB, a, b locks.Lease, first, second <-chan Result) {
	t.Helper()
	UnlockOnce(t, a)
	r1 := Receive(t, first)
	if r1.Err != nil {
		t.Fatalf("first waiter: %v", r1.Err)
	}
	select {
	case r := <-second:
		t.Fatalf("the second waiter got a permit while two were held: %v", r.Err)
	default:
	}
	UnlockOnce(t, b)
	r2 := Receive(t, second)
	if r2.Err != nil {
		t.Fatalf("second waiter: %v", r2.Err)
	}
	if Token(t, r2.Lease) <= Token(t, r1.Lease) {
		t.Fatal("the second waiter's token is not above the first's")
	}
	UnlockOnce(t, r1.Lease)
	UnlockOnce(t, r2.Lease)
}
