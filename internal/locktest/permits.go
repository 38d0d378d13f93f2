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
