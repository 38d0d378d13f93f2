package propertytest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest/internal/gostack"
)

// The suite's scheduler. Every lock operation of a run (TryLock, Lock,
// Unlock, Renew) runs on a goroutine of its own, with a context that
// carries the operation's locks.Gate. The backends' clients call the gate
// before each request (fakes installs the hooks), and the suite's Observer
// calls it at each locks.Point the lock reports. The gate parks the
// operation there until the driver, the goroutine that runs rapid's
// actions, lets it go. So the driver, following the seed, decides which
// operation's next request is sent, and it may leave one operation parked
// between two of its requests (stalled) while other clients act and time
// passes.
//
// Whether an operation has reached its next gate, finished, or is blocked
// waiting (a Lock waiting for a notification) is not a question of wall
// time: after every step the driver waits until the process is quiescent,
// that is until the runtime's scheduler counts no goroutine runnable and
// none running but the driver, and two fingerprints of every goroutine's
// stack, taken a moment apart (during which the network poller runs), are
// identical. On a backend whose connections are all in memory
// (Backend.InProcess: miniredis, MemLock and the in-memory mutants'
// servers) no request can hide in the kernel, so the pause between the
// two fingerprints is a few microseconds of the thread's own, not the
// millisecond a runtime timer takes: the suite runs two to three times
// faster there. Nothing can then happen until the driver acts, and what it
// sees (who is parked, whose lease closed its Done) is the same in every
// replay of the seed. The limits: a lock or client that waits on wall-time
// timers (a retry back-off in real time, an embedded etcd's leases) and
// tests running in parallel in the same process can still move on their
// own; the scheduler then gives up waiting after maxQuiesce and says so in
// the run's log. No wait of the driver is unbounded (see StuckLimit).

// maxQuiesce bounds the time the driver waits for quiescence: it gives
// up once this much wall time has passed and the process has had this
// much CPU time meanwhile, or ten times as much wall time has passed.
// Counting CPU time keeps a machine loaded by other processes, which
// leaves this one a tenth of a core, from passing for a goroutine that
// keeps waking (a give-up promises no exact replay).
const maxQuiesce = 250 * time.Millisecond

// StuckLimit is the longest the suite's scheduler waits, in wall time, for
// one thing: an operation to finish, block or reach its next request; a
// settle of every operation after a step; a crashed operation to return;
// the process to become quiescent, over failed tries in a row. Past it the
// run ends with an error that names the operation and the likely cause
// (in Run the test fails with it, in Check and RunStandalone it is the
// Report's Output, and RunStandalone returns ErrNoVerdict). On a backend
// in real time (Backend.Clock is locks.SystemClock) twice the options'
// TTL + Slack is added, since a waiter there may rightly wait for a lease
// to run out. A lock that polls in wall time while the run's clock stands
// still is told sooner, once one operation passed its gate pollPassages
// times within pollWall of wall time.
const StuckLimit = 5 * time.Second

// stuckLimit is StuckLimit, shortened by the suite's own tests of it.
var stuckLimit = StuckLimit

// pollPassages and pollWall: an operation that passes its gate this often,
// over at least this much wall time, in one wait of the driver, while the
// run's clock stands still, polls in wall time. A lock that waits on the
// run's clock blocks between its attempts; no lock sends that many
// requests in one step otherwise. pollWall is shortened by the suite's
// own tests of it.
const pollPassages = 100

var pollWall = 2 * time.Second

// sched holds the live operations of one run.
type sched struct {
	mu     sync.Mutex
	ops    []*op         // live operations, by id
	kick   chan struct{} // a gate event happened (capacity 1)
	nextID int
	notes  []string // quiescence give-ups, for the run's log
	// settles counts the settles that ran to their end: a check that
	// must give the operations a chance to react waits for it to move.
	settles int

	// quiesceMu makes the waits for quiescence one at a time: the driver
	// and a clock's dispatch (oneByOne, run by whoever advanced the clock)
	// may both wait at once, and share snapshot's buffers and the restless
	// count. The one that waits for the lock is parked meanwhile, which the
	// other's snapshots see as blocked.
	quiesceMu sync.Mutex
	// snapshot's buffers, reused.
	samples []metrics.Sample
	stacks  []runtime.StackRecord

	minBlock time.Duration // Options.Settle
	// inProcess: every connection is in memory (Backend.InProcess), so
	// quiescent need not sleep for the network poller.
	inProcess bool
	// realTime: the run's clock is the system's, so time passes while
	// an operation stands stalled whatever the driver does.
	realTime bool
	// requests times the requests out on an in-process run (see
	// requestClock); nil on any other, where they run on wall time.
	requests *requestClock

	// The run's clock (nil: moved by the driver only); the bound of each
	// wait (StuckLimit, more in real time).
	clock locks.Clock
	limit time.Duration
	// fail ends the run with the error (rapid's Fatalf); nil keeps the
	// error only. It is called at most once, from run or settle.
	fail func(error)
	// Guarded by mu: why the run was given up on (every wait then
	// returns at once), and whether fail was told.
	hung   error
	failed bool
	// The quiescence tries that failed in a row: since when, how many.
	restlessSince time.Time
	restless      int
}

// debugQuiesce prints the snapshots that kept the scheduler from quiescence.
var debugQuiesce = os.Getenv("LOCKPROOF_DEBUG_QUIESCE") == "1"

func newSched(minBlock time.Duration, inProcess bool) *sched {
	s := &sched{kick: make(chan struct{}, 1), minBlock: minBlock, inProcess: inProcess, limit: stuckLimit}
	if inProcess {
		s.requests = newRequestClock()
	}
	return s
}

// follow makes clock the run's clock: the system's makes the run one in
// real time, whose waits may last lease (the options' TTL + Slack) twice
// beyond StuckLimit.
func (s *sched) follow(clock locks.Clock, lease time.Duration) {
	s.clock = clock
	_, s.realTime = clock.(locks.SystemClock)
	s.limit = stuckLimit
	if s.realTime {
		s.limit += 2 * lease
	}
}

// clockNow reads the run's clock; the zero time without one.
func (s *sched) clockNow() time.Time {
	if s.clock == nil {
		return time.Time{}
	}
	return s.clock.Now()
}

// giveUp records why the run cannot go on; the first reason stands.
func (s *sched) giveUp(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hung == nil {
		s.hung = err
	}
}

// stuck returns why the run was given up on, or nil.
func (s *sched) stuck() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hung
}

// check ends the run through fail, once, if it was given up on. crash
// does not call it: it runs in the suite's deferred clean-up too, where
// the run may already be ending; the driver's next run or settle does.
func (s *sched) check() {
	s.mu.Lock()
	err, tell := s.hung, s.hung != nil && !s.failed && s.fail != nil
	s.failed = s.failed || tell
	s.mu.Unlock()
	if tell {
		s.fail(err)
	}
}

// describe names o in the scheduler's messages, with its gate passages.
func (o *op) describe() string {
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	return fmt.Sprintf("client %d's %s (%d requests sent)", o.client, o.name, o.sent)
}

// op is one lock operation running on its own goroutine.
type op struct {
	s      *sched
	id     int
	client int
	name   string // "TryLock", "Lock", "Unlock", "Renew", ...
	ctx    context.Context
	cancel context.CancelFunc
	budget time.Duration // OpTimeout of running time; 0 for Lock
	timer  *time.Timer   // cancels ctx once budget of running time passed
	done   chan struct{} // closed when the operation's function returned

	// Guarded by s.mu.
	parked   []*gateReq
	passed   int // gate passages let go so far
	sent     int // of them, requests (not the lock's points)
	stallAt  int // the passage to stop at; -1: none
	crashed  bool
	finished bool
	parallel bool // it once had two requests parked at once
	// heldUp: time passed while it stood stalled after a request had
	// gone (see holdUp).
	heldUp bool
}

// gateReq is one parked request.
type gateReq struct {
	what string
	seq  int
	go_  chan struct{}
}

// start runs fn on a goroutine of its own, as operation name of client.
// budget > 0 bounds the wall time the operation may run while not parked
// (its context is cancelled after that much running time). fn receives a
// context carrying the operation's gate; finished is called on the
// operation's goroutine when fn returned (or the goroutine ended).
func (s *sched) start(client int, name string, budget time.Duration, stallAt int, fn func(ctx context.Context)) *op {
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.nextID++
	o := &op{s: s, id: s.nextID, client: client, name: name, cancel: cancel, budget: budget,
		done: make(chan struct{}), stallAt: stallAt}
	s.ops = append(s.ops, o)
	s.mu.Unlock()
	o.ctx = locks.WithGate(ctx, opGate{o})
	if budget > 0 {
		o.timer = time.AfterFunc(budget, cancel)
	}
	go func() {
		defer func() {
			s.mu.Lock()
			o.finished = true
			left := o.parked // sent in parallel and given up on (a timeout of wall time)
			o.parked = nil
			s.mu.Unlock()
			for _, r := range left {
				close(r.go_)
			}
			if o.timer != nil {
				o.timer.Stop()
			}
			close(o.done)
			s.poke()
		}()
		fn(o.ctx)
	}()
	return o
}

func (s *sched) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// opGate is an operation's locks.Gate.
type opGate struct{ o *op }

var _ locks.RequestClocker = opGate{}

// RequestClock is the scheduler's request clock on an in-process run;
// nil (wall time) on any other.
func (g opGate) RequestClock() locks.Clock {
	if g.o.s.requests == nil {
		return nil
	}
	return g.o.s.requests
}

// Request parks the operation until the driver lets the request go. A
// crashed operation is never parked: its context is cancelled, and the
// request fails or is not sent.
func (g opGate) Request(ctx context.Context, what string) func() {
	o, s := g.o, g.o.s
	s.mu.Lock()
	if o.crashed || o.finished {
		// Crashed: its context is cancelled, the request fails or is not
		// sent. Finished: a request the lock sends on the operation's
		// context after it returned (a release in the background) has no
		// operation to schedule it with.
		s.mu.Unlock()
		return nil
	}
	r := &gateReq{what: what, seq: o.passed + len(o.parked), go_: make(chan struct{})}
	o.parked = append(o.parked, r)
	if o.timer != nil {
		o.timer.Stop()
	}
	s.mu.Unlock()
	s.poke()
	<-r.go_
	return nil
}

// state of an operation, seen from the driver.
type opState int

const (
	opParked   opState = iota // waiting at a gate
	opFinished                // its function returned
	opBlocked                 // neither, with the process quiescent: waiting for something
)

// look reports o's state without waiting: parked, finished, or neither
// (ok false).
func (s *sched) look(o *op) (opState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case o.finished:
		return opFinished, true
	case len(o.parked) > 0:
		return opParked, true
	}
	return 0, false
}

// wait waits until o is parked or finished or, when blockedOK, the process
// is quiescent without either (o is blocked waiting). Without blockedOK
// it waits for parked or finished only: TryLock, Unlock and Renew do not
// wait for other clients, and their running time is bounded by their
// budget.
//
// It gives up (opBlocked, with the run given up on) after the scheduler's
// limit of wall time, plus the operation's budget of running time.
func (s *sched) wait(o *op, blockedOK bool) opState {
	began := time.Now()
	limit := s.limit + o.budget
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		if st, ok := s.look(o); ok {
			return st
		}
		if s.stuck() != nil {
			return opBlocked
		}
		if time.Since(began) >= limit {
			s.giveUp(fmt.Errorf("propertytest: the run is stuck: %s neither returned nor reached its next request within %v of wall time%s: %s",
				o.describe(), limit, budgetNote(o), stuckAdvice))
			return opBlocked
		}
		if !blockedOK && s.requests == nil {
			select {
			case <-s.kick:
			case <-o.done:
			case <-deadline.C:
			}
			continue
		}
		select {
		case <-s.kick:
			continue
		case <-o.done:
			continue
		case <-deadline.C:
			continue
		case <-time.After(200 * time.Microsecond):
		}
		// Quiescent, or given up on: either way nothing more to wait for.
		// On an in-process run, quiescent has timed out every request
		// left without an answer, so an operation that must finish does.
		s.quiescent()
		if st, ok := s.look(o); ok {
			return st
		}
		if !blockedOK {
			continue
		}
		if left := s.minBlock - time.Since(began); left > 0 {
			time.Sleep(left) // a backend in real time: give it its round trip
			continue
		}
		return opBlocked
	}
}

// stuckAdvice is the fix the scheduler's messages propose for a lock that
// never blocks where the suite can see it.
const stuckAdvice = "a lock must wait on the run's clock (locks.Clock: the Backend's Clock) and return when its context ends; " +
	"a backend reached over TCP is best dialled in memory (Backend.InProcess), so that the suite sees a waiter block"

// budgetNote tells, for an operation with a budget of running time, that
// its context was cancelled when that ran out.
func budgetNote(o *op) string {
	if o.budget == 0 {
		return ""
	}
	return fmt.Sprintf(", though its context was cancelled after %v of running time (Options.OpTimeout)", o.budget)
}

// fanOut reports whether o has ever had two requests parked at once, or
// has not sent any yet. A point the lock reported does not count as a
// request: Redlock's Unlock and Renew pass the lease's point before they
// ask every node at once, and had their first request let go as soon as
// it came, whichever node's the Go runtime readied first.
func (s *sched) fanOut(o *op) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	o.parallel = o.parallel || len(o.parked) > 1
	return o.parallel || o.sent == 0 // before its first request, nobody knows
}

// release lets o's first parked request go (by name, then arrival):
// requests sent in parallel by one operation go in a fixed order.
func (s *sched) release(o *op) {
	s.mu.Lock()
	if len(o.parked) == 0 {
		// It ended between the look and now (a timeout of its own let its
		// parked requests go) or a request it parked was given up on.
		s.mu.Unlock()
		return
	}
	sort.SliceStable(o.parked, func(i, j int) bool {
		if o.parked[i].what != o.parked[j].what {
			return o.parked[i].what < o.parked[j].what
		}
		return o.parked[i].seq < o.parked[j].seq
	})
	r := o.parked[0]
	o.parked = o.parked[1:]
	o.passed++
	if !strings.HasPrefix(r.what, pointGate) {
		o.sent++
	}
	if o.timer != nil && len(o.parked) == 0 {
		o.timer.Reset(o.budget)
	}
	s.mu.Unlock()
	close(r.go_)
}

// stalled reports whether o waits at the gate it is to stop at.
func (s *sched) stalled(o *op) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !o.finished && len(o.parked) > 0 && o.stallAt >= 0 && o.passed >= o.stallAt
}

// run lets o go until it finishes, stalls (reaches the passage it is to
// stop at) or, for an operation that may wait (blockedOK), blocks.
//
// It is bounded: an operation that keeps coming back to its gate, a lock
// polling in wall time (see pollPassages), or one that is not done after
// the scheduler's limit, ends the run (check).
func (s *sched) run(o *op, blockedOK bool) opState {
	defer s.check()
	began, clockAt := time.Now(), s.clockNow()
	s.mu.Lock()
	passedAt := o.passed
	s.mu.Unlock()
	for {
		st := s.wait(o, blockedOK)
		if st != opParked {
			return st
		}
		if s.stalled(o) {
			return opParked
		}
		if s.stuck() != nil {
			return opBlocked
		}
		s.mu.Lock()
		passages := o.passed - passedAt
		s.mu.Unlock()
		wall, still := time.Since(began), s.clockNow().Equal(clockAt)
		switch {
		case still && passages >= pollPassages && wall >= pollWall:
			s.giveUp(fmt.Errorf("propertytest: the run is stuck: %s passed its gate %d times in %v of wall time while the run's clock stood still: "+
				"the lock polls on a wall-time timer (time.Sleep, time.After, a retry back-off), so the suite never sees it wait. "+
				"Make it poll on the run's clock (locks.Clock: the Backend's Clock), or dial the backend in memory (Backend.InProcess) with Options.Settle 0, "+
				"so that a waiter counts as blocked between its attempts", o.describe(), passages, wall.Round(time.Millisecond)))
			return opBlocked
		case wall >= s.limit:
			s.giveUp(fmt.Errorf("propertytest: the run is stuck: %s passed its gate %d times in %v of wall time without finishing or blocking: %s",
				o.describe(), passages, wall.Round(time.Millisecond), stuckAdvice))
			return opBlocked
		}
		if s.fanOut(o) {
			// Requests sent in parallel (Redlock asks every node at once)
			// reach the gate in an order the Go runtime picks: wait until
			// all that are coming have come, so that release's order is
			// the same in every replay.
			s.quiescent()
		}
		s.release(o)
	}
}

// stoodAfterSend reports whether o stands stalled after at least one of
// its requests (or points) went. Called with s.mu held.
func (o *op) stoodAfterSend() bool {
	return !o.finished && len(o.parked) > 0 && o.stallAt >= 0 && o.passed >= o.stallAt && o.passed >= 1
}

// holdUp notes, before the run's time moves, every operation that stands
// stalled after a request went: what that request did may have run its
// course unseen meanwhile (an acquisition that won, expired and was taken
// over before its reply, or its read-back, came).
func (s *sched) holdUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.ops {
		if o.stoodAfterSend() {
			o.heldUp = true
		}
	}
}

// wasHeldUp reports whether time passed while o stood stalled after a
// request went (holdUp, or a stall resumed in real time).
func (s *sched) wasHeldUp(o *op) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return o.heldUp
}

// resume clears o's stall and runs it as run does.
func (s *sched) resume(o *op, blockedOK bool) opState {
	s.mu.Lock()
	if s.realTime && o.stoodAfterSend() {
		o.heldUp = true
	}
	o.stallAt = -1
	s.mu.Unlock()
	return s.run(o, blockedOK)
}

// crashed reports whether o was stopped by crash.
func (s *sched) crashed(o *op) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return o.crashed
}

// crash cancels o and lets its parked requests go (they fail on the
// cancelled context, or are not sent), then waits for it to end and for
// the process to be quiescent: what the cancelled operation left running
// in the background (a release sent after it returned) is over or
// blocked before the driver goes on, say to crash the next client.
func (s *sched) crash(o *op) {
	s.mu.Lock()
	o.crashed = true
	o.cancel()
	parked := o.parked
	o.parked = nil
	s.mu.Unlock()
	for _, r := range parked {
		close(r.go_)
	}
	if s.stuck() == nil {
		// Bounded; once the run is given up on, not waited for at all:
		// it is ending.
		t := time.NewTimer(s.limit)
		select {
		case <-o.done:
		case <-t.C:
			s.giveUp(fmt.Errorf("propertytest: the run is stuck: %s had not returned %v of wall time after its context was cancelled (its client crashed): %s",
				o.describe(), s.limit, stuckAdvice))
		}
		t.Stop()
	}
	s.quiescent()
}

// forget drops finished operations from the live list.
func (s *sched) forget(o *op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.ops {
		if x == o {
			s.ops = append(s.ops[:i], s.ops[i+1:]...)
			return
		}
	}
}

// settle waits for quiescence, then runs every parked operation that is
// not stalled (a waiter woken by a release reached its next request), in
// id order, until none is left: the fixed point every action ends at.
//
// An operation that blocked once during a settle is not run again in the
// same settle: a waiter that polls on wall-time timers (a retry back-off)
// would otherwise keep coming back to its gate and the settle would never
// end. It goes on at the next step.
//
// It is bounded by the scheduler's limit as a whole, and ends the run
// (check) when it was given up on.
func (s *sched) settle() {
	defer s.check()
	began := time.Now()
	blocked := map[*op]bool{}
	for {
		if s.stuck() != nil {
			return
		}
		if wall := time.Since(began); wall >= s.limit {
			s.giveUp(fmt.Errorf("propertytest: the run is stuck: the operations had not all finished, blocked or stalled %v of wall time after the step: %s",
				wall.Round(time.Millisecond), stuckAdvice))
			return
		}
		s.quiescent()
		var next *op
		s.mu.Lock()
		for _, o := range s.ops {
			if !blocked[o] && !o.finished && len(o.parked) > 0 && !(o.stallAt >= 0 && o.passed >= o.stallAt) {
				next = o
				break
			}
		}
		s.mu.Unlock()
		if next == nil {
			s.settles++
			return
		}
		if s.run(next, true) == opBlocked {
			blocked[next] = true
		}
	}
}

// oneByOne starts the timer callbacks one Advance of a manual clock
// passed (ManualClock.SetDispatch), each on a goroutine of its own, and
// waits until the process is quiescent before it starts the next: the
// lease watchdogs and expiries due in one advance then act in deadline
// order, not in the order the Go runtime picks.
func (s *sched) oneByOne(fs []func()) {
	for _, f := range fs {
		go f()
		s.quiescent()
	}
}

// quiescent waits until the process is quiescent (see the comment at the
// top of this file) and reports true, or gives up after maxQuiesce and
// reports false.
//
// Tries that fail in a row for the scheduler's limit give the run up: a
// goroutine keeps waking. Once the run was given up on, it returns false
// at once.
func (s *sched) quiescent() bool {
	s.quiesceMu.Lock()
	defer s.quiesceMu.Unlock()
	if s.stuck() != nil {
		return false
	}
	began, cpu := time.Now(), processCPU()
	deadline := began.Add(maxQuiesce)
	pause := 50 * time.Microsecond
	var prev, snap []uint64
	for {
		var busy bool
		snap, busy = s.snapshot(snap)
		if !busy && prev != nil && slices.Equal(snap, prev) {
			if s.requests != nil && s.requests.fireNext() {
				// A request that nothing will answer any more: its
				// time ran out, and its client goes on.
				prev = nil
				began, cpu = time.Now(), processCPU()
				deadline = began.Add(maxQuiesce)
				continue
			}
			s.restless = 0
			return true
		}
		if now := time.Now(); now.After(deadline) && processCPU()-cpu < maxQuiesce && now.Sub(began) < 10*maxQuiesce {
			// The process has not had its time yet (a loaded machine).
			deadline = now.Add(maxQuiesce / 10)
		} else if now.After(deadline) {
			s.mu.Lock()
			s.notes = append(s.notes, "not quiescent after "+maxQuiesce.String()+": this run may not replay exactly")
			s.mu.Unlock()
			if debugQuiesce {
				println("propertytest: not quiescent; the goroutines now:\n" + textSnapshot())
			}
			s.noteRestless()
			return false
		}
		if busy {
			prev = nil
		} else {
			prev = append(prev[:0], snap...)
		}
		if s.inProcess {
			// Nothing is in flight outside the runtime's sight: a pause
			// far below the timers' millisecond, which the goroutines
			// this one readied use to run, then look again.
			pauseThread()
			continue
		}
		if busy {
			runtime.Gosched()
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
}

// noteRestless counts a failed try at quiescence and gives the run up
// once they failed in a row for the scheduler's limit.
func (s *sched) noteRestless() {
	if s.restless == 0 {
		s.restlessSince = time.Now()
	}
	s.restless++
	if wall := time.Since(s.restlessSince); wall >= s.limit {
		s.giveUp(fmt.Errorf("propertytest: the run is stuck: the process was not once quiescent in %v of wall time (%d tries of %v): "+
			"a goroutine keeps waking (%s). Run the lock's background work on the run's clock (locks.Clock: the Backend's Clock) "+
			"and end it when its client crashes (Crasher)",
			wall.Round(time.Millisecond), s.restless, maxQuiesce, restlessGoroutines()))
	}
}

// restlessGoroutines names the goroutines that run, or move, between two
// looks at every stack a moment apart: at most three, by the first
// function of each that is not the standard library's.
func restlessGoroutines() string {
	first := stacksByID(textSnapshot())
	time.Sleep(time.Millisecond)
	second := stacksByID(textSnapshot())
	var names []string
	for _, id := range slices.Sorted(maps.Keys(second)) {
		st := second[id]
		header, _, _ := strings.Cut(st, "\n")
		moving := strings.Contains(header, "[running]") || strings.Contains(header, "[runnable]") || first[id] != st
		if !moving {
			continue
		}
		names = append(names, fmt.Sprintf("goroutine %d in %s", id, firstOwnFunc(st)))
		if len(names) == 3 {
			break
		}
	}
	if len(names) == 0 {
		return "none seen moving in a look of 1ms"
	}
	return strings.Join(names, ", ")
}

// stacksByID splits a dump of every goroutine's stack by goroutine id,
// leaving out the first, the caller's own.
func stacksByID(dump string) map[int]string {
	out := map[int]string{}
	for i, st := range strings.Split(strings.TrimSpace(dump), "\n\n") {
		var id int
		if _, err := fmt.Sscanf(st, "goroutine %d ", &id); err != nil || i == 0 {
			continue
		}
		out[id] = st
	}
	return out
}

// firstOwnFunc returns the first function of a goroutine's stack outside
// the standard library (a package whose path's first element has a dot),
// else its first function.
func firstOwnFunc(stack string) string {
	var first string
	for _, line := range strings.Split(stack, "\n")[1:] {
		if line == "" || strings.HasPrefix(line, "\t") {
			continue
		}
		fn := strings.TrimPrefix(line, "created by ")
		if i := strings.LastIndexByte(fn, '('); i > 0 && !strings.HasPrefix(line, "created by ") {
			fn = fn[:i]
		}
		fn, _, _ = strings.Cut(fn, " in goroutine")
		if first == "" {
			first = fn
		}
		if elem, _, _ := strings.Cut(gostack.FuncPackage(fn), "/"); strings.Contains(elem, ".") {
			return fn
		}
	}
	return first
}

// The scheduler's counters that snapshot reads; the indexes below follow
// this order.
var schedMetrics = []string{
	"/sched/goroutines/runnable:goroutines",
	"/sched/goroutines/running:goroutines",
	"/sched/goroutines-created:goroutines",
	"/sched/goroutines:goroutines",
	"/sched/goroutines/not-in-go:goroutines",
}

// snapshot reports whether any goroutine is runnable or running besides
// the caller (busy) and, when none is, a fingerprint of every goroutine:
// the number created so far and, for each live goroutine, a hash of its
// stack, sorted. Two equal fingerprints a pause apart mean that no
// goroutine started, ended or moved during the pause.
//
// It reads the runtime's scheduler metrics first, which costs well under
// a microsecond, and takes the goroutine profile (program counters only,
// no symbols) only when they show nothing running: a few hundred
// microseconds where rendering every stack as text (runtime.Stack) took
// over a millisecond and was most of the suite's CPU time. The
// fingerprint is written over dst, the caller's own buffer.
func (s *sched) snapshot(dst []uint64) ([]uint64, bool) {
	if s.samples == nil {
		s.samples = make([]metrics.Sample, len(schedMetrics))
		for i, name := range schedMetrics {
			s.samples[i].Name = name
		}
	}
	metrics.Read(s.samples)
	if s.samples[0].Value.Uint64() > 0 || s.samples[1].Value.Uint64() > 1 ||
		s.inProcess && s.samples[4].Value.Uint64() > 0 { // in a system call: about to move
		return dst[:0], true
	}
	for {
		n, ok := runtime.GoroutineProfile(s.stacks)
		if ok {
			dst = append(dst[:0], s.samples[2].Value.Uint64(), s.samples[3].Value.Uint64())
			for _, r := range s.stacks[:n] {
				h := uint64(14695981039346656037) // FNV-1a over the program counters
				for _, pc := range r.Stack() {
					h = (h ^ uint64(pc)) * 1099511628211
				}
				dst = append(dst, h)
			}
			slices.Sort(dst[2:])
			return dst, false
		}
		s.stacks = make([]runtime.StackRecord, n+n/2+8)
	}
}

// textSnapshot renders every goroutine's stack, for LOCKPROOF_DEBUG_QUIESCE.
func textSnapshot() string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// takeNotes returns and clears the scheduler's notes.
func (s *sched) takeNotes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.notes
	s.notes = nil
	return n
}

// processCPU returns the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pauseThread stops the calling thread for about 20µs in the kernel,
// without the runtime's timers, whose sleeps last at least a millisecond
// when every processor is idle.
func pauseThread() {
	ts := syscall.NsecToTimespec(20_000)
	_ = syscall.Nanosleep(&ts, nil)
}
