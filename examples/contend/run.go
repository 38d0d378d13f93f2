package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
)

// lockName is the one lock every worker contends on.
const lockName = "contend"

// Report is what Run measured.
type Report struct {
	Config Config
	// Backend names the server the locked run used.
	Backend string
	// Prefix is the key prefix of the run; no key under it is left behind.
	Prefix   string
	Locked   LockedRun
	Unlocked UnlockedRun
}

// LockedRun is the workload under the lock, through a fenced counter.
type LockedRun struct {
	Acquisitions int
	Elapsed      time.Duration
	// Counter is the fenced counter's final value; Expected is
	// Workers × Rounds.
	Counter, Expected int
	// Rejections counts the reads and writes the fence refused as stale.
	Rejections uint64
	// HighestToken is the highest fencing token the fence saw.
	HighestToken locks.Token
	// LostLeases counts leases that had expired or been taken over by the
	// time their holder unlocked them.
	LostLeases int
}

// UnlockedRun is the same workload with no lock on a plain counter.
type UnlockedRun struct {
	Elapsed           time.Duration
	Counter, Expected int
	// Lost is Expected - Counter: increments overwritten by a concurrent one.
	Lost int
}

// OK reports whether the locked run lost no update and had nothing refused.
func (r Report) OK() bool {
	return r.Locked.Counter == r.Locked.Expected && r.Locked.Rejections == 0
}

// Run runs the workload under the lock, then without one, and prints the
// report to w. An error means the run could not be carried out (bad config,
// Redis unreachable, ctx ended); lost updates are findings, in the Report.
// Every goroutine Run starts has ended when it returns.
func Run(ctx context.Context, cfg Config, w io.Writer) (Report, error) {
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	b, err := openBackend(ctx, cfg.RedisAddr)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Config: cfg, Backend: b.desc, Prefix: b.prefix}
	rep.Locked, err = runLocked(ctx, cfg, b)
	if err = errors.Join(err, b.close()); err != nil {
		return rep, err
	}
	rep.Unlocked = runUnlocked(cfg)
	if err := rep.print(w); err != nil {
		return rep, fmt.Errorf("writing the report: %w", err)
	}
	return rep, nil
}

// runLocked runs Workers workers over Procs processes, each process with its
// own client and Locker, all on one lock and one fenced counter.
func runLocked(ctx context.Context, cfg Config, b *backend) (LockedRun, error) {
	lockers, err := newLockers(cfg, b)
	if err != nil {
		return LockedRun{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		counter     locks.Fence[int]
		acquired    atomic.Int64
		lostLeases  atomic.Int64
		wg          sync.WaitGroup
		failOnce    sync.Once
		firstFailed error
	)
	start := time.Now()
	for p, l := range lockers {
		for range cfg.workersOf(p) {
			wg.Go(func() {
				s, err := work(ctx, l, &counter, cfg.Rounds)
				acquired.Add(int64(s.acquired))
				lostLeases.Add(int64(s.lostLeases))
				if err != nil {
					failOnce.Do(func() { firstFailed = err; cancel() })
				}
			})
		}
	}
	wg.Wait()
	run := LockedRun{
		Acquisitions: int(acquired.Load()),
		Elapsed:      time.Since(start),
		Counter:      counter.Value(),
		Expected:     cfg.total(),
		Rejections:   counter.Stats().Rejected,
		LostLeases:   int(lostLeases.Load()),
	}
	run.HighestToken, _ = counter.Highest()
	return run, firstFailed
}

// newLockers returns one Locker per process, each on a client of its own.
func newLockers(cfg Config, b *backend) ([]*redislock.Locker, error) {
	lockers := make([]*redislock.Locker, cfg.Procs)
	for p := range lockers {
		l, err := redislock.New(b.newClient(), lockName, locks.WithPrefix(b.prefix), locks.WithTTL(cfg.TTL))
		if err != nil {
			return nil, err
		}
		lockers[p] = l
	}
	return lockers, nil
}

// workerStats is what one worker counted.
type workerStats struct {
	acquired, lostLeases int
}

// work makes rounds acquisitions of l, each a fenced read-modify-write of
// counter. A stale token is a finding (the fence counts it), not an error.
func work(ctx context.Context, l locks.Locker, counter *locks.Fence[int], rounds int) (workerStats, error) {
	var s workerStats
	for range rounds {
		lease, err := l.Lock(ctx)
		if err != nil {
			return s, err
		}
		s.acquired++
		incErr := increment(lease, counter)
		err = lease.Unlock(ctx)
		if errors.Is(err, locks.ErrLeaseExpired) || errors.Is(err, locks.ErrNotHeld) {
			s.lostLeases++
			err = nil
		}
		if err = errors.Join(incErr, err); err != nil {
			return s, err
		}
	}
	return s, nil
}

// increment reads counter and writes it back plus one, both with the lease's
// fencing token.
func increment(lease locks.Lease, counter *locks.Fence[int]) error {
	tok, ok := lease.Token()
	if !ok {
		return fmt.Errorf("lock %q: %w", lease.Name(), locks.ErrNoFencing)
	}
	v, err := counter.Read(tok)
	if err == nil {
		err = counter.Write(tok, v+1)
	}
	if errors.Is(err, locks.ErrStaleToken) {
		return nil
	}
	return err
}

// runUnlocked runs the same workload with no lock: each increment loads the
// counter, yields, and stores the value it loaded plus one, so increments
// made meanwhile by other workers are overwritten.
func runUnlocked(cfg Config) UnlockedRun {
	var counter atomic.Int64 // atomic: the updates race, the memory accesses do not
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.Workers {
		wg.Go(func() {
			for range cfg.Rounds {
				v := counter.Load()
				runtime.Gosched()
				counter.Store(v + 1)
			}
		})
	}
	wg.Wait()
	run := UnlockedRun{Elapsed: time.Since(start), Counter: int(counter.Load()), Expected: cfg.total()}
	run.Lost = run.Expected - run.Counter
	return run
}
