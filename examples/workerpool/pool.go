package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// Config is one run of the pool.
type Config struct {
	Backend string        // "redis", "consul" or "zk"
	Permits int           // calls the API allows at once
	Workers int           // workers over all processes
	Procs   int           // processes, each with its own client and semaphore
	Jobs    int           // jobs, each one call
	Work    time.Duration // how long a call takes
}

// DefaultConfig is 8 workers in 4 processes running 100 jobs through an API
// that allows 3 calls at once, on miniredis.
func DefaultConfig() Config {
	return Config{Backend: "redis", Permits: 3, Workers: 8, Procs: 4, Jobs: 100, Work: time.Millisecond}
}

var errConfig = errors.New("bad configuration")

func (c Config) validate() error {
	switch {
	case c.Permits < 1:
		return fmt.Errorf("%w: %d permits", errConfig, c.Permits)
	case c.Workers < 1 || c.Procs < 1 || c.Procs > c.Workers:
		return fmt.Errorf("%w: %d workers in %d processes", errConfig, c.Workers, c.Procs)
	case c.Jobs < 1:
		return fmt.Errorf("%w: %d jobs", errConfig, c.Jobs)
	case c.Work < 0:
		return fmt.Errorf("%w: work %v", errConfig, c.Work)
	}
	return nil
}

// Report is what the API saw in each run.
type Report struct {
	Permits   int
	Limited   Seen // through the semaphore
	Unlimited Seen // with no semaphore
}

// OK reports whether, through the semaphore, the API never had more than
// Permits calls at once, every job ran exactly once, and no two calls
// carried the same fencing token.
func (r Report) OK() bool {
	l := r.Limited
	return l.MostInFlight <= r.Permits && l.Lost == 0 && l.Twice == 0 && l.SharedTokens == 0
}

// Seen is what the API observed of one run, from outside the pool.
type Seen struct {
	Calls        int // calls received
	MostInFlight int // the most calls in flight at once
	Lost, Twice  int // jobs never run, jobs run more than once
	SharedTokens int // calls whose fencing token another call had too
}

// api is the rate-limited service: it counts the calls in flight, the
// jobs it has run and the tokens it has been shown.
type api struct {
	work     time.Duration
	mu       sync.Mutex
	inFlight int
	seen     Seen
	done     map[int]int
	tokens   map[locks.Token]int
}

func newAPI(work time.Duration) *api {
	return &api{work: work, done: map[int]int{}, tokens: map[locks.Token]int{}}
}

// call runs job; token is the caller's fencing token, 0 without one.
func (a *api) call(job int, token locks.Token) {
	a.mu.Lock()
	a.inFlight++
	a.seen.Calls++
	a.seen.MostInFlight = max(a.seen.MostInFlight, a.inFlight)
	a.done[job]++
	if token != 0 {
		a.tokens[token]++
	}
	a.mu.Unlock()
	time.Sleep(a.work)
	a.mu.Lock()
	a.inFlight--
	a.mu.Unlock()
}

// report tallies what the API saw of jobs jobs.
func (a *api) report(jobs int) Seen {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.seen
	for j := range jobs {
		switch n := a.done[j]; {
		case n == 0:
			s.Lost++
		case n > 1:
			s.Twice++
		}
	}
	for _, n := range a.tokens {
		if n > 1 {
			s.SharedTokens += n
		}
	}
	return s
}

// Run runs the jobs through the semaphore on cfg's backend, then without
// it, and narrates both to w.
func Run(ctx context.Context, cfg Config, w io.Writer) (Report, error) {
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	be, err := startBackend(cfg.Backend)
	if err != nil {
		return Report{}, err
	}
	defer be.close()
	sems := make([]locks.Locker, cfg.Procs)
	for i := range sems {
		if sems[i], err = be.semaphore("api-calls", cfg.Permits); err != nil {
			return Report{}, err
		}
	}
	fmt.Fprintf(w, "%d workers in %d processes, %d jobs, an API that allows %d calls at once (%s)\n",
		cfg.Workers, cfg.Procs, cfg.Jobs, cfg.Permits, be.name)
	rep := Report{Permits: cfg.Permits}
	limited := newAPI(cfg.Work)
	if err := pool(ctx, cfg, func(ctx context.Context, worker, job int) error {
		lease, err := sems[worker%cfg.Procs].Lock(ctx)
		if err != nil {
			return err
		}
		tok, _ := lease.Token()
		limited.call(job, tok)
		return lease.Unlock(ctx)
	}); err != nil {
		return rep, err
	}
	rep.Limited = limited.report(cfg.Jobs)
	unlimited := newAPI(cfg.Work)
	if err := pool(ctx, cfg, func(_ context.Context, _, job int) error { unlimited.call(job, 0); return nil }); err != nil {
		return rep, err
	}
	rep.Unlimited = unlimited.report(cfg.Jobs)
	narrate(w, rep)
	return rep, nil
}

// pool runs the jobs on cfg.Workers workers, each job as do(ctx, worker,
// job), and returns the errors; the first ends the run.
func pool(ctx context.Context, cfg Config, do func(ctx context.Context, worker, job int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	errs := make(chan error, cfg.Workers)
	var wg sync.WaitGroup
	for wk := range cfg.Workers {
		wg.Go(func() {
			for j := range jobs {
				if err := do(ctx, wk, j); err != nil {
					errs <- fmt.Errorf("worker %d, job %d: %w", wk, j, err)
					cancel()
					return
				}
			}
		})
	}
	wg.Go(func() {
		defer close(jobs)
		for j := range cfg.Jobs {
			select {
			case jobs <- j:
			case <-ctx.Done():
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func narrate(w io.Writer, r Report) {
	l, u := r.Limited, r.Unlimited
	fmt.Fprintf(w, "  through the semaphore: %d calls, at most %d in flight (limit %d), %d jobs lost, %d run twice, %d calls with a shared token\n",
		l.Calls, l.MostInFlight, r.Permits, l.Lost, l.Twice, l.SharedTokens)
	fmt.Fprintf(w, "  without it:            %d calls, at most %d in flight (limit %d)\n", u.Calls, u.MostInFlight, r.Permits)
	if r.OK() {
		fmt.Fprintln(w, "PASS: the semaphore kept the pool within the limit")
	} else {
		fmt.Fprintln(w, "FAIL: the semaphore let the pool break the limit")
	}
}
