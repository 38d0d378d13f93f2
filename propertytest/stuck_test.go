package propertytest

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// stuckWall is how long a test of a stuck run may take before it counts as
// hung: far above StuckLimit and the runs rapid adds to reproduce and
// shrink the failure, so that no load of the machine fails it.
const stuckWall = 60 * time.Second

// wallPoller is a lock written as a careless library writes one: its Lock
// polls TryLock of an in-memory lock every 2 ms of wall time (time.Sleep,
// not the run's clock). With ignoreCtx it does not stop when its context
// ends, only once stop is closed (at the end of the test, so that nothing
// leaks).
type wallPoller struct {
	inner     *fakes.MemLock
	ignoreCtx bool
	stop      <-chan struct{}
}

func (p *wallPoller) TryLock(ctx context.Context) (locks.Lease, error) { return p.inner.TryLock(ctx) }

func (p *wallPoller) Lock(ctx context.Context) (locks.Lease, error) {
	for {
		lease, err := p.inner.TryLock(ctx)
		if p.ignoreCtx {
			if err == nil {
				return lease, nil
			}
		} else if !errors.Is(err, locks.ErrLocked) {
			return lease, err
		}
		select {
		case <-p.stop:
			return nil, errors.New("wallPoller: stopped")
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// wallPollerLock is the Factory of wallPoller; inProcess is Backend's.
// restless also starts a goroutine that never stops running until the
// backend closes: the process is never quiescent.
func wallPollerLock(t *testing.T, inProcess, ignoreCtx, restless bool) Factory {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return func(env Env) (*Backend, error) {
		be, err := memLock()(env)
		if err != nil {
			return nil, err
		}
		newLocker := be.NewLocker
		be.NewLocker = func(name string, opts ...locks.Option) (locks.Locker, error) {
			l, err := newLocker(name, opts...)
			if err != nil {
				return nil, err
			}
			return &wallPoller{inner: l.(*fakes.MemLock), ignoreCtx: ignoreCtx, stop: stop}, nil
		}
		be.InProcess = inProcess
		if restless {
			var wg sync.WaitGroup
			var closed atomic.Bool
			wg.Go(func() { spinUntil(&closed) })
			be.Close = func() { closed.Store(true); wg.Wait() }
		}
		return be, nil
	}
}

// spinUntil runs, yielding, until done is set.
func spinUntil(done *atomic.Bool) {
	for !done.Load() {
		runtime.Gosched()
	}
}

// checkStuck runs Check on factory and asserts that it ended, within
// stuckWall, with no verdict and a message that says want.
func checkStuck(t *testing.T, factory Factory, o Options, want ...string) {
	t.Helper()
	suitemain.SetChecks(t, 20)
	o.ShrinkRuns = 1 // every candidate that fails costs up to StuckLimit
	began := time.Now()
	rep := Check(t, factory, o)
	if took := time.Since(began); took > stuckWall {
		t.Fatalf("the run took %v to end, more than %v", took, stuckWall)
	}
	if !rep.Failed || len(rep.Broken()) > 0 {
		t.Fatalf("failed %v, broken %v, want a failure with no property: %s", rep.Failed, rep.Broken(), rep.Output)
	}
	for _, w := range want {
		if !strings.Contains(rep.Output, w) {
			t.Fatalf("the output does not say %q:\n%s", w, rep.Output)
		}
	}
}

// A Lock that polls every 2 ms of wall time, on a backend the suite does
// not know to be in memory, with a Settle longer than its pause (as
// redsync over loopback TCP was run): the scheduler saw it come back to
// its gate again and again and never let the step end, and the test hung
// until go test's -timeout. Now the run ends, naming the cause and the fix.
func TestWallTimePollerEndsTheRun(t *testing.T) {
	shortPollWall(t)
	checkStuck(t, wallPollerLock(t, false, false, false), Options{Settle: 20 * time.Millisecond},
		"propertytest: the run is stuck", "Lock", "polls on a wall-time timer", "while the run's clock stood still", "Backend.InProcess")
}

// The fix the message proposes works: the same poller, dialled in memory
// with Settle 0, counts as blocked between its attempts, and the suite
// judges the lock (fakes.MemLock underneath, which is correct).
func TestWallTimePollerInMemoryPasses(t *testing.T) {
	suitemain.SetChecks(t, 10)
	rep := Check(t, wallPollerLock(t, true, false, false), Options{})
	if rep.Failed {
		t.Fatalf("the in-memory poller failed:\n%s", rep.Output)
	}
}

// A goroutine that never lets the process become quiescent used to cost
// every wait of the scheduler its full maxQuiesce, for ever; now the run
// ends after StuckLimit of failed tries, naming the goroutine.
func TestRestlessGoroutineEndsTheRun(t *testing.T) {
	shortStuckLimit(t)
	checkStuck(t, wallPollerLock(t, true, false, true), Options{},
		"propertytest: the run is stuck", "keeps waking", "propertytest.spinUntil")
}

// A Lock that does not return when its context ends (here a client's
// crash) used to hang the driver, which waited for it for ever.
func TestLockIgnoringItsContextEndsTheRun(t *testing.T) {
	shortStuckLimit(t)
	checkStuck(t, wallPollerLock(t, true, true, false), Options{},
		"propertytest: the run is stuck", "after its context was cancelled", "had not returned")
}

// RunStandalone (lockproof check) returns the message as ErrNoVerdict.
func TestWallTimePollerStandalone(t *testing.T) {
	shortPollWall(t)
	began := time.Now()
	rep, err := RunStandalone(wallPollerLock(t, false, false, false), Options{Settle: 20 * time.Millisecond, ShrinkRuns: 1},
		Standalone{Name: "poller", Checks: 20, ShrinkTime: time.Second})
	if took := time.Since(began); took > stuckWall {
		t.Fatalf("RunStandalone took %v to end, more than %v", took, stuckWall)
	}
	if !errors.Is(err, ErrNoVerdict) || !strings.Contains(err.Error(), "polls on a wall-time timer") {
		t.Fatalf("RunStandalone returned %v, want ErrNoVerdict naming the poller", err)
	}
	if rep == nil || !strings.Contains(rep.Output, "polls on a wall-time timer") {
		t.Fatalf("the report does not name the poller: %+v", rep)
	}
}

// The scheduler's own waits, with its limit cut to 100 ms: a TryLock that
// neither returns nor sends a request (it ignores its context, which its
// budget cancelled) gives the run up, and fail hears of it once, from
// run; every wait after that returns at once.
func TestSchedWaitsAreBounded(t *testing.T) {
	s := newSched(0, true)
	s.limit = 100 * time.Millisecond
	var told []error
	s.fail = func(err error) { told = append(told, err) }
	var stop atomic.Bool
	defer stop.Store(true)
	o := s.start(0, "TryLock", 10*time.Millisecond, stallNever, func(ctx context.Context) {
		for !stop.Load() {
			time.Sleep(time.Millisecond) // deaf to ctx
		}
	})
	began := time.Now()
	if st := s.run(o, false); st != opBlocked {
		t.Fatalf("run returned state %d, want opBlocked", st)
	}
	if len(told) != 1 || !strings.Contains(told[0].Error(), "client 0's TryLock") ||
		!strings.Contains(told[0].Error(), "neither returned nor reached its next request") {
		t.Fatalf("fail was told %v", told)
	}
	s.crash(o) // not waited for: the run is given up on
	s.settle()
	if took := time.Since(began); took > stuckWall {
		t.Fatalf("the waits took %v", took)
	}
	if len(told) != 1 {
		t.Fatalf("fail was told %d times, want once", len(told))
	}
	stop.Store(true)
	<-o.done
}

// shortStuckLimit cuts the scheduler's limit to a second for one test, so
// that a run given up costs a second, not StuckLimit.
func shortStuckLimit(t *testing.T) {
	old := stuckLimit
	stuckLimit = time.Second
	t.Cleanup(func() { stuckLimit = old })
}

// shortPollWall cuts the wall time after which the scheduler calls a
// Lock that keeps passing its gate a wall-time poller from 2 s to 300 ms
// for one test: the poller still passes its gate pollPassages times
// first (every 2 ms), and each run that meets it costs 300 ms instead of
// 2 s.
func shortPollWall(t *testing.T) {
	old := pollWall
	pollWall = 300 * time.Millisecond
	t.Cleanup(func() { pollWall = old })
}
