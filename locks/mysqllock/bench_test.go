package mysqllock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// Benchmarks on the in-process engine (or the server of
// mysqlfake.EnvDSN):
//
//	go test -run '^$' -bench . -benchtime 300x -count 5 ./locks/mysqllock/
//
// Handoff: W goroutines, each with its own pool and Locker (as W processes
// would be), take turns on one lock holding it ~100 µs. handoff-p50/p99-ms
// run from one holder's Unlock call to the next holder's Lock return.

// BenchmarkUncontended: one goroutine locks and unlocks one lock b.N times.
func BenchmarkUncontended(b *testing.B) {
	s := newServer(b)
	l := newLocker(b, s.DB(), "bench")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		lease, err := l.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandoff: W goroutines contend until b.N acquisitions are done.
func BenchmarkHandoff(b *testing.B) {
	for _, waiters := range []int{4, 16} {
		b.Run(fmt.Sprintf("waiters=%d", waiters), func(b *testing.B) {
			s := newServer(b)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			var tickets atomic.Int64
			tickets.Store(int64(b.N))
			var releasedAt atomic.Int64
			var mu sync.Mutex
			var handoffs []time.Duration
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range waiters {
				l := newLocker(b, openDB(b, s), "bench", locks.WithWatchdog(false))
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for tickets.Add(-1) >= 0 {
						lease, err := l.Lock(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						if r := releasedAt.Swap(0); r != 0 {
							mu.Lock()
							handoffs = append(handoffs, time.Duration(time.Now().UnixNano()-r))
							mu.Unlock()
						}
						for t0 := time.Now(); time.Since(t0) < 100*time.Microsecond; {
						}
						releasedAt.Store(time.Now().UnixNano())
						if err := lease.Unlock(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			b.ResetTimer()
			began := time.Now()
			close(start)
			wg.Wait()
			elapsed := time.Since(began)
			b.StopTimer()
			slices.Sort(handoffs)
			if len(handoffs) > 0 {
				b.ReportMetric(locktest.PercentileMs(handoffs, 50), "handoff-p50-ms")
				b.ReportMetric(locktest.PercentileMs(handoffs, 99), "handoff-p99-ms")
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
		})
	}
}
