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
func TestWatchEventsPerHandoff(t *testing.T) {
	const workers, perWorker = 8, 5
	s := fakes.Etcd(t)
	bn := &bench{s: s}
	for _, tc := range []struct {
		lib      library
		min, max float64
	}{
		{libraries[0], 0.5, 1.2},                // lockproof
		{libraries[1], 2, float64(workers - 1)}, // lockproof-naive: ~3.3 measured
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
		})
	}
}
