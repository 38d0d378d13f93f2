package etcdlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks/lockbench/peers"
)

// TestWatchEventsPerHandoff: with 8 workers (each its own client) taking
// turns, queue mode delivers about one watch event per hand-off (only the
// next waiter wakes), naive mode several (every waiting worker wakes; with
// no hold time, about 3.3 of the 7 others wait at a hand-off). The events
// are counted by an interceptor on the clients' watch streams, as in the
// benchmarks.
//
// The naive row is the control that the counter sees a herd at all. How
// many workers wait at a hand-off depends on how the machine runs them:
// 3.0 to 3.9 events per hand-off idle, and once 1.77 of 12 runs at load
// average 3, when fewer of the workers overlapped. So its bound is 1.5
// (above queue mode's ceiling), and it must show at least 1.4 times queue
// mode's events in the same run.
func TestWatchEventsPerHandoff(t *testing.T) {
	const workers, perWorker = 8, 5
	s := fakes.Etcd(t)
	bn := &bench{s: s}
	var queued float64 // queue mode's events per hand-off
	for _, tc := range []struct {
		lib      library
		min, max float64
	}{
		{libraries[0], 0.5, 1.2},                  // lockproof
		{libraries[1], 1.5, float64(workers - 1)}, // lockproof-naive: ~3.3 measured
	} {
		t.Run(tc.lib.name, func(t *testing.T) {
			c := &peers.EtcdCounter{}
			ws := bn.workers(t, tc.lib, workers, c)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for _, w := range ws {
				wg.Go(func() {
					for range perWorker {
						if err := w.Lock(ctx); err != nil {
							errs <- err
							return
						}
						if err := w.Unlock(ctx); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			handoffs := workers*perWorker - 1
			per := float64(c.Events()) / float64(handoffs)
			t.Logf("%s: %.2f watch events per hand-off", tc.lib.name, per)
			if per < tc.min || per > tc.max {
				t.Fatalf("%s: %.2f watch events per hand-off, want within [%v, %v]", tc.lib.name, per, tc.min, tc.max)
			}
			if tc.lib.name == libraries[0].name {
				queued = per
			} else if per < 1.4*queued {
				t.Fatalf("%s: %.2f watch events per hand-off, not 1.4 times queue mode's %.2f", tc.lib.name, per, queued)
			}
		})
	}
}
