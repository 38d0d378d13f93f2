package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
)

// TestExclusion: 32 goroutines in 4 "processes" (each with its own clients
// and Locker) take the lock on 5 nodes again and again, on the wall clock.
// Redlock has no fencing token, so exclusion is checked directly: a counter
// of goroutines inside the critical section must never exceed 1, and a plain
// int incremented there without synchronisation must count every
// acquisition (under -race, an overlap is also a reported data race).
//
// The number of rounds per goroutine depends on the build and the backend
// (see exclusionRounds): the target, 200, on real servers.
func TestExclusion(t *testing.T) {
	g := redisfake.NewCluster(t, 5)
	const procs, perProc = 4, 8
	rounds := exclusionRounds(g.Node(0).Real())
	var inside, overlaps, noQuorum atomic.Int32
	var reqs requestCount
	count := 0
	var wg sync.WaitGroup
	errs := make(chan error, procs*perProc)
	began := time.Now()
	for range procs {
		clients := g.NewClients()
		for _, c := range clients {
			c.AddHook(&reqs)
		}
		// A request timeout far above the nodes' latency: this test is about
		// exclusion, and on a loaded 2-core machine under -race a miniredis
		// script can take longer than the default TTL/10.
		l, err := New(clients, "counter", append(g.LockOptions(),
			locks.WithTTL(30*time.Second), locks.WithRequestTimeout(5*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		for range perProc {
			wg.Go(func() {
				errs <- increment(l, rounds, &inside, &overlaps, &count, &noQuorum)
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d acquisitions overlapped another holder", n)
	}
	if want := procs * perProc * rounds; count != want {
		t.Errorf("count = %d, want %d", count, want)
	}
	acq := float64(procs * perProc * rounds)
	t.Logf("per acquisition: %.1f SET NX transactions, %.1f scripts (release, renew)",
		float64(reqs.tx.Load())/acq, float64(reqs.scripts.Load())/acq)
	t.Logf("%d goroutines in %d Lockers × %d acquisitions in %v", procs*perProc, procs, rounds, time.Since(began))
	if n := noQuorum.Load(); n > 0 {
		t.Logf("%d attempts found no quorum in time and were retried", n)
	}
}

// increment takes the lock rounds times and counts inside it. Lock returns
// locks.ErrNoQuorum at once when too few nodes answer in time, leaving the
// retry to the caller; on an overloaded machine that happens without any
// fault, so increment retries (and counts the retries in noQuorum).
func increment(l *Locker, rounds int, inside, overlaps *atomic.Int32, count *int, noQuorum *atomic.Int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range rounds {
		lease, err := l.Lock(ctx)
		for errors.Is(err, locks.ErrNoQuorum) && ctx.Err() == nil {
			noQuorum.Add(1)
			lease, err = l.Lock(ctx)
		}
		if err != nil {
			return fmt.Errorf("round %d: Lock: %w", i, err)
		}
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		*count++
		inside.Add(-1)
		if err := lease.Unlock(ctx); err != nil {
			return fmt.Errorf("round %d: Unlock: %w", i, err)
		}
	}
	return nil
}

// requestCount is a go-redis hook counting the lock's requests.
type requestCount struct{ tx, scripts atomic.Int64 }

func (*requestCount) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *requestCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			c.scripts.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *requestCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.tx.Add(1)
		return next(ctx, cmds)
	}
}
