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

// The suite's scheduler. Every lock operation of a run runs on its own
// goroutine with a context carrying its locks.Gate; the backends' clients
// call the gate before each request and the Observer at each locks.Point.
// The gate parks the operation until the driver (the goroutine running
// rapid's actions) lets it go, so the seed decides which request is sent
// next, and an operation may stay parked between two requests (stalled)
// while others act and time passes.
//
// Whether an operation reached its next gate, finished or is blocked is
// not a question of wall time: after every step the driver waits until
// the process is quiescent, that is the runtime counts no goroutine
// runnable or running but the driver, and two fingerprints of every
// goroutine's stack a moment apart are identical. With every connection in
// memory (Backend.InProcess) no request can hide in the kernel, so the
// pause between fingerprints is microseconds, not a timer's millisecond;
// nothing can happen until the driver acts, and what it sees is the same
// in every replay. Wall-time timers and parallel tests can still move on
// their own; the scheduler then gives up after maxQuiesce and says so in
// the run's log. No wait of the driver is unbounded (see StuckLimit).

// maxQuiesce bounds the wait for quiescence: it gives up once this much
// wall time and this much process CPU time have passed, or ten times as
// much wall time. Counting CPU time keeps a loaded machine from passing
// for a goroutine that keeps waking.
const maxQuiesce = 250 * time.Millisecond

// StuckLimit is the longest the suite's scheduler waits, in wall time, for
// one thing: an operation to finish, block or reach its next request; a
// settle after a step; a crashed operation to return; quiescence, over
// failed tries in a row. Past it the run ends with an error naming the
// operation and the likely cause (see the package documentation). On a
// backend in real time (Backend.Clock is locks.SystemClock) twice TTL +
// Slack is added, since a waiter there may rightly wait out a lease. A
// lock polling in wall time while the run's clock stands still is told
// sooner, once one operation passed its gate pollPassages times within
// pollWall.
const StuckLimit = 5 * time.Second

// stuckLimit is StuckLimit, shortened by the suite's own tests of it.
var stuckLimit = StuckLimit

// pollPassages and pollWall: an operation passing its gate this often,
// over at least this much wall time, in one wait while the run's clock
// stands still, polls in wall time. pollWall is shortened by the suite's
// own tests.
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

	// quiesceMu makes the waits for quiescence (the driver's and a
	// clock's dispatch, oneByOne) one at a time: they share snapshot's
	// buffers and the restless count.
	quiesceMu sync.Mutex
	// snapshot's buffers, reused.
	samples []metrics.Sample
	stacks  []runtime.StackRecord

	minBlock time.Duration // Options.Settle
	// inProcess: every connection is in memory (Backend.InProcess).
	inProcess bool
	// parked: goroutines that sit in a system call for good and so never
	// move by themselves (os/signal's receiver, once a signal.Notify
	// started it), counted when the run began.
	parked uint64
	// realTime: the run's clock is the system's, so time passes while
	// an operation stands stalled whatever the driver does.
	realTime bool
	// requests times the requests out on an in-process run (see
	// requestClock); nil on any other, where they run on wall time.
	requests *requestClock

	// The run's clock (nil: moved by the driver only); each wait's bound.
	clock locks.Clock
	limit time.Duration
	// fail ends the run with the error (rapid's Fatalf), at most once;
	// nil keeps the error only.
	fail func(error)
	// Guarded by mu: why the run was given up on, and whether fail was told.
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
		s.parked = signalReceivers(textSnapshot())
	}
	return s
}

// signalReceivers counts the goroutines of stacks (runtime.Stack's text
// of every goroutine) waiting in os/signal's receiver: started by the
// process's first signal.Notify, it waits for signals in a system call
// for the rest of the process, so a snapshot must not take it for a
// goroutine about to move.
func signalReceivers(stacks string) uint64 {
	return uint64(strings.Count(stacks, "\nos/signal.signal_recv("))
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
// does not call it (it also runs in deferred clean-up).
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

// start runs fn on a goroutine of its own, as operation name of client,
// with a context carrying its gate. budget > 0 cancels the context after
// that much running time not parked; finished is called on the goroutine
// when fn returned.
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

// Request parks the operation until the driver lets the request go.
func (g opGate) Request(ctx context.Context, what string) func() {
	o, s := g.o, g.o.s
	s.mu.Lock()
	if o.crashed || o.finished {
		// Crashed: the request fails or is not sent. Finished: a request
		// on the operation's context after it returned has no operation
		// to schedule it with.
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
// is quiescent without either (o is blocked). It gives up (opBlocked, the
// run given up on) after the scheduler's limit plus o's budget.
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
		// Quiescent or given up on; in-process, quiescent has timed out
		// every unanswered request, so an operation that must finish does.
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
// has not sent any yet. A reported point does not count as a request.
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
		// It ended between the look and now, or its request was given up on.
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

// run lets o go until it finishes, stalls or, when blockedOK, blocks. An
// operation that keeps coming back to its gate, polls in wall time (see
// pollPassages) or outlasts the scheduler's limit ends the run (check).
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
			// Parallel requests reach the gate in an order the runtime
			// picks: wait for all, so release's order replays.
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

// holdUp notes, before time moves, every operation stalled after a request
// went: that request may have run its course unseen meanwhile.
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

// crash cancels o and lets its parked requests go, then waits for it to
// end and for quiescence, so what it left running in the background is
// over or blocked before the driver goes on.
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
		// Bounded; not waited for once the run is given up on.
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
// not stalled, in id order, until none is left: the fixed point every
// action ends at. An operation that blocked once is not run again in the
// same settle (a wall-time poller would never let it end). It is bounded
// by the scheduler's limit and ends the run (check) when given up on.
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

// oneByOne starts the callbacks one manual-clock Advance made due
// (ManualClock.SetDispatch), each on its own goroutine, waiting for
// quiescence before the next, so they act in deadline order.
func (s *sched) oneByOne(fs []func()) {
	for _, f := range fs {
		go f()
		s.quiescent()
	}
}

// quiescent waits until the process is quiescent (see the top of this
// file) and reports true, or gives up after maxQuiesce and reports false.
// Tries failing in a row for the scheduler's limit give the run up.
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
				// Unanswerable request: its time ran out.
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
			// Nothing in flight outside the runtime's sight: pause
			// briefly, then look again.
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

// restlessGoroutines names up to three goroutines that move between two
// looks at every stack, by each one's first non-standard-library function.
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

// snapshot reports whether any goroutine besides the caller is runnable
// or running (busy) and, when none is, a fingerprint over dst: goroutines
// created so far and each live one's stack hash, sorted. Equal
// fingerprints a pause apart mean nothing started, ended or moved. It
// reads the cheap scheduler metrics first and takes the goroutine profile
// (program counters only) only when they show nothing running.
func (s *sched) snapshot(dst []uint64) ([]uint64, bool) {
	if s.samples == nil {
		s.samples = make([]metrics.Sample, len(schedMetrics))
		for i, name := range schedMetrics {
			s.samples[i].Name = name
		}
	}
	metrics.Read(s.samples)
	if s.samples[0].Value.Uint64() > 0 || s.samples[1].Value.Uint64() > 1 ||
		s.inProcess && s.samples[4].Value.Uint64() > s.parked { // in a system call: about to move
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
// below the runtime timers' millisecond.
func pauseThread() {
	ts := syscall.NsecToTimespec(20_000)
	_ = syscall.Nanosleep(&ts, nil)
}
