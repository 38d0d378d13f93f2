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
	contend(t, lockers, goroutines, rounds, hold, func(int) func() {
		n := inside.Add(1)
		raise(&most, n)
		return func() { inside.Add(-1) }
	})
	if m := int(most.Load()); m > permits {
		t.Fatalf("%d holders at once, permits %d", m, permits)
	}
	return int(most.Load())
}

// ReadersOrOneWriter is AtMostPermits for a read-write lock: goroutines
// goroutines per Locker of readers (shared leases) and of writers
// (exclusive ones) contend as AtMostPermits's do. It fails t if a writer
// was ever inside with anyone else, and returns the most readers that were
// inside at once.
func ReadersOrOneWriter(t testing.TB, readers, writers []locks.Locker, goroutines, rounds int, hold time.Duration) int {
	t.Helper()
	var reading, writing, most atomic.Int32
	var clash atomic.Bool
	all := append(append([]locks.Locker{}, readers...), writers...)
	contend(t, all, goroutines, rounds, hold, func(i int) func() {
		if i < len(readers) {
			n := reading.Add(1)
			raise(&most, n)
			clash.CompareAndSwap(false, writing.Load() > 0)
			return func() { reading.Add(-1) }
		}
		w := writing.Add(1)
		clash.CompareAndSwap(false, w > 1 || reading.Load() > 0)
		return func() { writing.Add(-1) }
	})
	if clash.Load() {
		t.Fatal("a writer was inside together with another holder")
	}
	return int(most.Load())
}

// raise sets most to n if n is higher.
func raise(most *atomic.Int32, n int32) {
	for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
	}
}

// contend runs the goroutines of AtMostPermits: enter(i) is called by a
// goroutine of lockers[i] once it holds, and what it returns just before
// the goroutine gives the lease back.
func contend(t testing.TB, lockers []locks.Locker, goroutines, rounds int, hold time.Duration, enter func(i int) (leave func())) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(lockers)*goroutines)
	for i, l := range lockers {
		for range goroutines {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				for r := range rounds {
					acquire := l.Lock
					if r%2 == 1 {
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
					leave := enter(i)
					time.Sleep(hold)
					leave()
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
