package lockbench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// Worker is one goroutine's handle on a lock: Lock, then Unlock, again and
// again. Any lock library can be measured through it.
type Worker interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

// lockerWorker drives a locks.Locker, keeping the current lease itself.
type lockerWorker struct {
	l     locks.Locker
	lease locks.Lease
}

// FromLocker returns a Worker over l. Give each goroutine its own Worker;
// they may share l.
func FromLocker(l locks.Locker) Worker { return &lockerWorker{l: l} }

// Shared returns n workers over one Locker, as the goroutines of one
// process share it.
func Shared(l locks.Locker, n int) []Worker {
	ws := make([]Worker, n)
	for i := range ws {
		ws[i] = FromLocker(l)
	}
	return ws
}

func (w *lockerWorker) Lock(ctx context.Context) (err error) {
	w.lease, err = w.l.Lock(ctx)
	return err
}

func (w *lockerWorker) Unlock(ctx context.Context) error {
	if w.lease == nil {
		return errors.New("lockbench: Unlock without a lease")
	}
	err := w.lease.Unlock(ctx)
	w.lease = nil
	return err
}

// Contention describes a contended run.
type Contention struct {
	// Acquisitions is how many acquisitions the workers make in total.
	Acquisitions int
	// Hold is how long each holder keeps the lock (spinning: sleeps cannot
	// wait as little as 100 µs).
	Hold time.Duration
	// Budget, when positive, stops handing out acquisitions once the run has
	// lasted this long: the acquisitions already started finish, and Result
	// counts those made. Default 0: no limit, all Acquisitions are made.
	Budget time.Duration
	// Turns makes a worker that released wait until another worker has
	// acquired before it calls Lock again, so that every hand-off goes to a
	// waiter. Without it a lock that lets the releaser barge in hands the
	// lock back to it.
	Turns bool
}

// ErrExclusion is returned when two workers were inside the critical section
// at once: the lock under test is broken, and its numbers mean nothing.
var ErrExclusion = errors.New("lockbench: two holders at once")

// Result is what a contended run measured.
type Result struct {
	// Acquisitions made (fewer than asked when the Budget ran out) and the
	// wall time they took.
	Acquisitions int
	Elapsed      time.Duration
	// Handoffs are the times from a holder's Unlock call to the next
	// holder's Lock return, sorted.
	Handoffs []time.Duration
	// Waits are the times from a Lock call to its return, sorted.
	Waits []time.Duration
	// SelfHandoffs counts hand-offs back to the worker that had released.
	SelfHandoffs int
}

// AcqPerSec is the throughput.
func (r Result) AcqPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Acquisitions) / r.Elapsed.Seconds()
}

// SelfHandoffPercent is the share of hand-offs that went back to the
// releasing worker.
func (r Result) SelfHandoffPercent() float64 {
	if len(r.Handoffs) == 0 {
		return 0
	}
	return 100 * float64(r.SelfHandoffs) / float64(len(r.Handoffs))
}

// Percentile returns the p-th percentile (nearest rank, 0 < p ≤ 100) of
// sorted; 0 when it is empty.
func Percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[min(max(i, 1), len(sorted))-1]
}

// Uncontended runs Lock and Unlock n times on one worker and returns each
// cycle's latency, sorted.
func Uncontended(ctx context.Context, w Worker, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		began := time.Now()
		if err := w.Lock(ctx); err != nil {
			return nil, fmt.Errorf("lock: %w", err)
		}
		if err := w.Unlock(ctx); err != nil {
			return nil, fmt.Errorf("unlock: %w", err)
		}
		out = append(out, time.Since(began))
	}
	slices.Sort(out)
	return out, nil
}

// Contend runs the workers against each other until c.Acquisitions are done.
func Contend(ctx context.Context, workers []Worker, c Contention) (Result, error) {
	if len(workers) == 0 || c.Acquisitions <= 0 || c.Hold < 0 || c.Budget < 0 || (c.Turns && len(workers) < 2) {
		return Result{}, fmt.Errorf("lockbench: %d workers, %d acquisitions, hold %v, turns %v",
			len(workers), c.Acquisitions, c.Hold, c.Turns)
	}
	r := &run{turns: c.Turns, hold: c.Hold}
	r.turn = sync.NewCond(&r.turnMu)
	r.tickets.Store(int64(c.Acquisitions))
	r.lastHolder.Store(-1)
	per := make([]samples, len(workers))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() {
			<-start
			r.loop(ctx, int64(i), w, &per[i])
		})
	}
	began := time.Now()
	if c.Budget > 0 {
		stop := time.AfterFunc(c.Budget, r.stop)
		defer stop.Stop()
	}
	close(start)
	wg.Wait()
	res := Result{Acquisitions: int(r.made.Load()), Elapsed: time.Since(began), SelfHandoffs: int(r.selfHand.Load())}
	if r.err != nil {
		return res, r.err
	}
	if n := r.violations.Load(); n > 0 {
		return res, fmt.Errorf("%w: %d acquisitions found another holder inside", ErrExclusion, n)
	}
	for _, p := range per {
		res.Handoffs = append(res.Handoffs, p.handoff...)
		res.Waits = append(res.Waits, p.wait...)
	}
	slices.Sort(res.Handoffs)
	slices.Sort(res.Waits)
	return res, nil
}

// run is the state the workers of one Contend share.
type run struct {
	turns      bool
	hold       time.Duration
	tickets    atomic.Int64 // acquisitions left to start
	made       atomic.Int64 // acquisitions made
	inside     atomic.Int32 // workers in the critical section
	violations atomic.Int64
	releasedAt atomic.Int64 // UnixNano just before the last unlock; 0 once consumed
	lastHolder atomic.Int64
	selfHand   atomic.Int64

	turnMu sync.Mutex
	turn   *sync.Cond

	errOnce sync.Once
	err     error
}

type samples struct{ handoff, wait []time.Duration }

func (r *run) fail(err error) {
	r.errOnce.Do(func() { r.err = err })
	r.stop()
}

// stop hands out no more acquisitions and wakes the workers waiting for
// their turn.
func (r *run) stop() {
	r.tickets.Store(0)
	r.turnMu.Lock()
	r.turn.Broadcast()
	r.turnMu.Unlock()
}

func (r *run) loop(ctx context.Context, id int64, w Worker, s *samples) {
	for r.tickets.Add(-1) >= 0 {
		called := time.Now().UnixNano()
		if err := w.Lock(ctx); err != nil {
			r.fail(fmt.Errorf("lock: %w", err))
			return
		}
		acquired := time.Now().UnixNano()
		r.made.Add(1)
		if r.inside.Add(1) != 1 {
			r.violations.Add(1)
		}
		previous := r.passTurn(id)
		if released := r.releasedAt.Swap(0); released != 0 {
			s.handoff = append(s.handoff, time.Duration(acquired-released))
			if previous == id {
				r.selfHand.Add(1)
			}
		}
		s.wait = append(s.wait, time.Duration(acquired-called))
		for t0 := time.Now(); time.Since(t0) < r.hold; {
		}
		r.inside.Add(-1)
		r.releasedAt.Store(time.Now().UnixNano())
		if err := w.Unlock(ctx); err != nil {
			r.fail(fmt.Errorf("unlock: %w", err))
			return
		}
		r.awaitTurn(id)
	}
}

// passTurn records id as the last holder and returns the previous one; in
// turns mode it wakes the worker waiting for someone else to acquire.
func (r *run) passTurn(id int64) int64 {
	if !r.turns {
		return r.lastHolder.Swap(id)
	}
	r.turnMu.Lock()
	defer r.turnMu.Unlock()
	previous := r.lastHolder.Swap(id)
	r.turn.Broadcast()
	return previous
}

// awaitTurn, in turns mode, waits until another worker has acquired or no
// acquisitions are left.
func (r *run) awaitTurn(id int64) {
	if !r.turns {
		return
	}
	r.turnMu.Lock()
	defer r.turnMu.Unlock()
	for r.lastHolder.Load() == id && r.tickets.Load() > 0 {
		r.turn.Wait()
	}
}
