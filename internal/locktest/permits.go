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
