package propertytest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/lockproof/lockproof/linearize"
	"github.com/lockproof/lockproof/locks"
	"pgregory.net/rapid"
)

// held is one lease as the suite tracks it.
type held struct {
	lease  locks.Lease
	owner  uint64 // the suite's name for the acquisition, in the lease history
	token  uint64 // the fencing token, or a synthetic one without fencing
	fenced bool
	shared bool // a read lease of a read-write lock (Options.ReadWrite)
	// proved is the history time at which the last grant or renewal of the
	// lease returned: the backend may keep the lease until TTL after it,
	// whatever the holder believes.
	proved int64
	// faultEvents is the machine's faultEvents at the acquisition's call.
	faultEvents int
}

// work is a read-modify-write begun (read done) and not yet written.
type work struct {
	h      *held
	read   int
	writes int // admitted writes before the read
}

// client is one process using the lock.
type client struct {
	id     int
	locker locks.Locker
	reader locks.Locker // with Options.ReadWrite, the Locker of shared leases
	read   bool         // its next acquisition is shared (drawn by drawMode)
	cur    *held        // the lease it believes it holds
	stale  []*held      // leases that ran out without an Unlock: used for foreign calls
	op     *op          // a live operation: stalled at a gate, or a Lock waiting
	fin    func()       // what the driver does once op finished
	work   *work
	inner  []locks.Lease // nested holds on cur (Options.Reentrant), innermost last
	gen    int           // Lockers made for it so far: one more after each crash
}

// machine is one run of the state machine.
type machine struct {
	o     Options
	be    *Backend
	rec   *recorder
	reg   register
	cl    []*client
	probe *client // acquires on the suite's behalf for the named checks

	owners         uint64
	active         map[int]bool    // backend faults injected and not healed
	used           map[int]bool    // backend faults injected at least once
	unclaimed      map[string]bool // unclaimed faults injected during the run
	faulted        bool            // some backend fault was injected
	faultEvents    int             // backend faults injected or healed so far
	found          []Violation
	ran            map[Property]bool // the named checks this run made
	log            []string
	sched          *sched
	jitterSeed     uint64               // the seed of the clients' jitter sources
	fatal          error                // a failure of the harness outside an action's reach (a crashed client's new Locker)
	lapsed         []lapsed             // leases past their deadline, not yet signalled lost
	pairs          map[[2]uint64]bool   // owners reported holding at once
	fenced         int                  // 1: the lock's leases are fenced, -1: they are not, 0: no lease seen yet
	outcomes       map[string]*Outcomes // per kind of call (outcomeKinds)
	spurious       int                  // refusals of a free lock tolerated (Report.SpuriousRefusals)
	spuriousOwners map[uint64]bool      // the acquisitions they refused
	uncertain      int64                // history time of the last event that may have left the lock taken (unknown outcome, crash, foreign call)
	doubted        bool                 // such an event happened (uncertain may be 0, the history's start)

	// model is the model the lock history is checked against, recorded
	// once for the run (lockModel); lock is its checker.
	model linearize.Spec
	lock  linearize.Checker[linearize.LeaseInput, linearize.LeaseOutput]
}

func newMachine(o Options, be *Backend, jitterSeed uint64) (*machine, error) {
	m := &machine{o: o, be: be, rec: newRecorder(be.Clock), sched: newSched(o.Settle, be.InProcess),
		active: map[int]bool{}, used: map[int]bool{}, ran: map[Property]bool{}, unclaimed: map[string]bool{}}
	m.sched.follow(be.Clock, o.TTL+o.Slack)
	if c, ok := be.Clock.(ManualClock); ok {
		c.SetDispatch(m.sched.oneByOne)
	}
	var err error
	m.model = lockModel(o)
	if m.lock, err = linearize.Bind[linearize.LeaseInput, linearize.LeaseOutput](m.model); err != nil {
		return nil, fmt.Errorf("propertytest: %w", err)
	}
	m.jitterSeed = jitterSeed
	for i := 0; i <= o.Clients; i++ {
		c := &client{id: i}
		if err := m.newLocker(c, i < o.Clients); err != nil {
			return nil, err
		}
		if i == o.Clients {
			m.probe = c
		} else {
			m.cl = append(m.cl, c)
		}
	}
	if o.Reentrant {
		for i, c := range m.cl {
			for _, d := range m.cl[:i] {
				if c.locker == d.locker {
					return nil, fmt.Errorf("propertytest: Reentrant: clients %d and %d got the same Locker (%T): re-entry is by a Locker's owner, so each client needs one of its own", d.id, c.id, c.locker)
				}
			}
		}
	}
	return m, nil
}

// newLocker gives c a new Locker (and with Options.ReadWrite its readers'
// Locker), as a process starting anew would make: with Options.Reentrant
// and owner set, one of an owner id that no earlier Locker had.
func (m *machine) newLocker(c *client, owner bool) error {
	opts := []locks.Option{locks.WithTTL(m.o.TTL), locks.WithWatchdog(false), locks.WithObserver(crashObserver{}),
		locks.WithRand(rand.NewPCG(m.jitterSeed, uint64(c.id)<<32|uint64(c.gen)))}
	if m.o.Reentrant && owner {
		opts = append(opts, locks.WithOwner(fmt.Sprintf("propertytest-client-%d.%d", c.id, c.gen)))
	}
	c.gen++
	l, err := m.be.NewLocker(m.o.Name, opts...)
	if err != nil {
		return fmt.Errorf("propertytest: new locker for client %d: %w", c.id, err)
	}
	c.locker, c.reader = l, nil
	if m.o.ReadWrite {
		rwl, ok := l.(ReadWriteLocker)
		if !ok {
			return fmt.Errorf("propertytest: ReadWrite: the locker of client %d, a %T, is no ReadWriteLocker", c.id, l)
		}
		c.reader = rwl.RLocker()
	}
	return nil
}

func (m *machine) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf("t=%v ", m.at())+fmt.Sprintf(format, args...))
}

// round rounds a duration for the run's texts (linearize.RoundDuration).
func round(d time.Duration) time.Duration { return linearize.RoundDuration(d) }

// at is the run's time now, as its texts show it.
func (m *machine) at() time.Duration { return round(time.Duration(m.rec.now())) }

// since is t on the run's time, as its texts show it.
func (m *machine) since(t time.Time) time.Duration { return round(t.Sub(m.rec.start)) }

// doubt notes that the lock may have been left taken now (see uncertain).
func (m *machine) doubt() { m.uncertain, m.doubted = m.rec.now(), true }

func (m *machine) newOwner() uint64 { m.owners++; return m.owners }

// valid reports whether h is within its lease's local deadline.
func (m *machine) valid(h *held) bool {
	return h != nil && h.lease.Err() == nil && m.be.Clock.Now().Before(h.lease.Deadline())
}

// held wraps a granted lease with its owner and model token.
func (m *machine) held(lease locks.Lease, owner uint64, out linearize.LeaseOutput) *held {
	_, fenced := lease.Token()
	return &held{lease: lease, owner: owner, token: out.Token, fenced: fenced, proved: m.rec.now()}
}

// crashKey marks the context of a TryLock that CrashInTryLock stops.
type crashKey struct{}

// crashObserver is the Observer the suite gives every Locker. At
// locks.PointAcquired, within a TryLock whose context carries crashKey, it
// ends the goroutine (runtime.Goexit): the client dies there, after the
// backend granted and before TryLock returned, and nothing the lock would
// do after that point happens. At every other point it reported, the
// operation passes its gate (see sched.go): a point is a place where the
// scheduler may stall the client, a pause before a renewal for instance.
type crashObserver struct{}

// pointGate begins the name of the gate passage at a point the lock
// reported, "point acquired" for instance; requests are named by fakes.
const pointGate = "point "

func (crashObserver) Observe(ctx context.Context, e locks.Event) {
	if e.Point == locks.PointGrantedTooLate {
		// Not a gate: the history notes the grant the lock gives back
		// (see synthSlot.late), and the run goes on as it would have.
		if s, ok := ctx.Value(synthKey{}).(*synthSlot); ok {
			s.gaveBack(e)
		}
		return
	}
	if e.Point == locks.PointAcquired { // drawn whether or not the lease turns out fenced
		if s, ok := ctx.Value(synthKey{}).(*synthSlot); ok {
			if s.token == 0 {
				s.token = s.next()
			}
			s.acquired, s.fence, s.fenced = true, e.Token, e.Fenced
		}
	}
	if e.Point == locks.PointAcquired && ctx.Value(crashKey{}) != nil {
		runtime.Goexit()
	}
	locks.GateRequest(ctx, pointGate+e.Point.String())()
}

// synthKey marks the context of an acquisition: its synthSlot.
type synthKey struct{}

// synthSlot holds the synthetic token of an acquisition without fencing,
// drawn when the lock reports locks.PointAcquired (the backend granted),
// so that grants are numbered in the order they were made even when one
// stalls before it returns. A lock that reports no PointAcquired gets its
// number when the call returns.
type synthSlot struct {
	token uint64
	next  func() uint64

	// What the lock reported at PointAcquired: the backend granted, with
	// this token. A client that dies there did hold the lock.
	acquired bool
	fence    locks.Token
	fenced   bool

	// late are the grants the lock reported at PointGrantedTooLate and
	// gave back: each held the lock for a while within this call, which
	// the history must show beside the call's own outcome, or another
	// client's refusal then, and the lower token of a grant after it,
	// read as violations (a waiting Lock that returns a later grant).
	now  func() int64
	late []lateGrant
}

// lateGrant is one grant given back: when the lock reported it, history
// time, and its fencing token (0 without one).
type lateGrant struct {
	at    int64
	token uint64
}

// gaveBack notes a grant given back. Without a fencing token it gets no
// synthetic one: those number grants in the order the lock reported them,
// and this grant was made at some moment before its report, which may
// come after other clients' grants (Redlock's majority won at the start
// of an attempt held up past its validity).
func (s *synthSlot) gaveBack(e locks.Event) {
	g := lateGrant{at: s.now()}
	if e.Fenced {
		g.token = uint64(e.Token)
	}
	s.late = append(s.late, g)
}

func (s *synthSlot) take() uint64 {
	if s.token == 0 {
		s.token = s.next()
	}
	return s.token
}

// stallNever is the stall point of an operation that runs to its end.
const stallNever = -1

// drawStall draws where an operation stops for a while: mostly nowhere,
// else at its first, second or third gate (a point the lock reports, or a
// request to the backend). Gate 0 is before anything was sent.
func drawStall(t *rapid.T) int {
	if rapid.IntRange(0, 9).Draw(t, "stall?") < 7 {
		return stallNever
	}
	return rapid.IntRange(0, 2).Draw(t, "stall at gate")
}

// acquire starts an acquisition for c: Lock (blocking) or TryLock, the
// latter dying at locks.PointAcquired when crash is set. The outcome is
// recorded when the call returns; the driver's part (c.fin) runs once it
// finished: a granted lease goes to onGrant, or to take when it is nil.
func (m *machine) acquire(c *client, blocking, crash bool, stallAt int, onGrant func(h *held)) *op {
	owner := m.newOwner()
	i := m.rec.call(c.id, linearize.Acquire, m.o.Name, owner)
	events := m.faultEvents
	locker, shared := c.locker, c.read
	if shared {
		locker, c.read = c.reader, false
		m.rec.shared(i)
	}
	var lease locks.Lease
	var err error
	returned := false
	name, budget := "TryLock", m.o.OpTimeout
	if blocking {
		name, budget = "Lock", 0
	}
	synth := &synthSlot{next: m.rec.syntheticToken, now: m.rec.now}
	o := m.sched.start(c.id, name, budget, stallAt, func(ctx context.Context) {
		ctx = context.WithValue(ctx, synthKey{}, synth)
		if crash {
			ctx = context.WithValue(ctx, crashKey{}, true)
		}
		if blocking {
			lease, err = locker.Lock(ctx)
		} else {
			lease, err = locker.TryLock(ctx)
		}
		returned = true
		out, unknown := acquireOutcome(lease, err, synth.take)
		if out.OK && !unknown {
			out.Deadline = m.rec.deadline(lease.Deadline())
		}
		m.rec.ret(i, out, unknown)
	})
	c.op = o
	c.fin = func() {
		defer func() {
			for _, g := range synth.late {
				// The token the lock reported stands for the grant only
				// if its leases are fenced, which only a returned lease
				// tells (as for a crash at PointAcquired below): a lock
				// whose leases carry no token may still report its inner
				// lock's fenced events, and the history numbers its
				// grants itself. Until a lease told, the grant given
				// back is of unknown outcome.
				if m.fenced != 1 {
					g.token = 0
				}
				m.rec.gaveBack(i, m.newOwner(), g)
				m.logf("client %d: %s gave back a grant that came too late (token %d)", c.id, name, g.token)
			}
			// A claim lost unseen hides behind a known outcome that is
			// not itself that claim: a refusal, or a Lock's grant (made
			// by a later attempt). An unknown outcome already stands
			// for it, and a TryLock's grant is its one claim: another
			// acquire of unknown outcome would only cost the checker
			// time (a read-write history under -race ran out of it).
			if returned && m.sched.wasHeldUp(o) {
				if out, unknown := m.outputOf(i); !unknown && (!out.OK || blocking) {
					m.rec.heldUp(i, m.newOwner())
				}
			}
		}()
		if !returned {
			// It died at PointAcquired: the backend had granted it, with
			// the token the lock reported there (or the synthetic one).
			// Which token stands for it depends on whether this lock's
			// leases are fenced, which only a returned lease tells: until
			// one did, the grant stays of unknown outcome.
			out, known := linearize.LeaseOutput{OK: true}, synth.acquired
			switch {
			case m.fenced == 1 && synth.fenced:
				out.Token = uint64(synth.fence)
			case m.fenced == -1:
				out.Token = synth.take()
			default:
				known = false
			}
			if !known {
				out = linearize.LeaseOutput{}
			}
			m.rec.ret(i, out, !known)
			if _, crasher := c.locker.(Crasher); crasher {
				m.rec.cleanedUp(i) // its lease may end with its connections (crashedHolder)
			}
			m.count(name, nil, true, true)
			m.doubt()
			m.logf("client %d: crashed inside %s at %v", c.id, name, locks.PointAcquired)
			m.crash(c)
			return
		}
		out, unknown := m.outputOf(i)
		m.count(name, err, true, m.sched.crashed(o))
		if unknown {
			m.doubt()
			if m.sched.crashed(o) {
				m.rec.cleanedUp(i)
			}
		}
		if !out.OK || unknown {
			m.logf("client %d: %s -> %v", c.id, name, err)
			if !blocking && !unknown && c != m.probe && m.lockFree(c) {
				m.refusedWhileFree(c, owner)
			}
			return
		}
		h := m.held(lease, owner, out)
		h.shared, h.faultEvents = shared, events
		m.fenced = -1
		if h.fenced {
			m.fenced = 1
		}
		m.logf("client %d: %s%s -> granted, token %d", c.id, name, mode(shared), out.Token)
		if onGrant == nil {
			m.take(c, h)
			return
		}
		onGrant(h)
	}
	return o
}

// mode names an acquisition's mode in the log: nothing for an exclusive
// one.
func mode(shared bool) string {
	if shared {
		return " (read)"
	}
	return ""
}

// drawMode draws, with Options.ReadWrite, whether c's next acquisition is
// shared.
func (m *machine) drawMode(t *rapid.T, c *client) {
	c.read = m.o.ReadWrite && rapid.Bool().Draw(t, "read")
}

// take makes h c's lease: it checks the grant against the other clients'
// leases and starts the holder's read-modify-write.
func (m *machine) take(c *client, h *held) {
	_ = h.lease.Done() // a lease may start watching for its loss at the first call
	m.checkGrant(c, h)
	c.cur = h
	m.beginWork(c)
}

// release starts an Unlock or Renew by c of lease h (its own, or a stale
// one for a foreign call). done, if set, runs on the driver with the
// result once the call returned.
func (m *machine) release(c *client, h *held, unlock bool, stallAt int, done func(err error)) *op {
	kind, name := linearize.Renew, "Renew"
	if unlock {
		kind, name = linearize.Release, "Unlock"
	}
	i := m.rec.call(c.id, kind, m.o.Name, h.owner)
	rc := releaseCall{name: name, deadline: h.lease.Deadline(), valid: m.valid(h), straight: stallAt == stallNever}
	var err error
	o := m.sched.start(c.id, name, m.o.OpTimeout, stallAt, func(ctx context.Context) {
		if unlock {
			err = h.lease.Unlock(ctx)
		} else {
			err = h.lease.Renew(ctx)
		}
		out, unknown := releaseOutcome(err)
		m.rec.ret(i, out, unknown)
	})
	c.op = o
	c.fin = func() {
		m.count(name, err, false, m.sched.crashed(o))
		m.checkReleaseWorks(c, h, rc, o, err)
		if !unlock && err == nil {
			h.proved = m.rec.now()
		}
		if unlock && m.sched.wasHeldUp(o) {
			m.rec.releaseHeldUp(i)
		}
		if done != nil {
			done(err)
		}
	}
	return o
}

// drive runs c's new operation until it finishes, stalls or (a Lock)
// blocks, then settles the run and takes in what finished.
func (m *machine) drive(c *client) {
	o := c.op
	m.sched.run(o, o.name == "Lock")
	m.sched.settle()
	m.collect()
}

// now runs c's operation to its end, at once: the suite's own probes, and
// the calls whose result the next step needs.
func (m *machine) now(c *client) {
	o := c.op
	m.sched.resume(o, false)
	m.collect()
}

// tryLock makes one attempt for c, to its end, and returns the lease if
// granted; c does not take it (the caller decides).
func (m *machine) tryLock(c *client) (*held, error) {
	var h *held
	m.acquire(c, false, false, stallNever, func(g *held) { h = g })
	i := len(m.rec.lock) - 1
	m.now(c)
	if h != nil {
		return h, nil
	}
	if _, unknown := m.outputOf(i); unknown {
		return nil, errNoAnswer
	}
	return nil, locks.ErrLocked
}

// errNoAnswer is tryLock's error for an attempt of unknown outcome.
var errNoAnswer = errors.New("no answer (unknown outcome)")

// unlock and renew call the lease for client c (its own or a stale one),
// to their end, and return the result.
func (m *machine) unlock(c *client, h *held) error {
	var err error
	m.release(c, h, true, stallNever, func(e error) { err = e })
	m.now(c)
	return err
}

func (m *machine) renew(c *client, h *held) error {
	var err error
	m.release(c, h, false, stallNever, func(e error) { err = e })
	m.now(c)
	return err
}

// collect takes in the operations that finished, retires leases that ran
// out, and checks that a lost lease says so.
func (m *machine) collect() {
	for _, c := range append(m.cl, m.probe) {
		if o := c.op; o != nil {
			if st, ok := m.sched.look(o); ok && st == opFinished {
				fin := c.fin
				c.op, c.fin = nil, nil
				m.sched.forget(o)
				fin()
			}
		}
		m.checkLossSignalled(c)
		if c.cur != nil && !m.valid(c.cur) && !m.unlocking(c) {
			if c.cur.lease.Err() == nil || errors.Is(c.cur.lease.Err(), locks.ErrLeaseExpired) {
				c.stale = append(c.stale, c.cur)
			}
			c.cur, c.inner = nil, nil // its work, if any, goes on: a holder paused past its lease
		}
	}
	m.checkBelievers()
}

// unlocking reports whether c has an Unlock in progress.
func (m *machine) unlocking(c *client) bool { return c.op != nil && c.op.name == "Unlock" }

func (m *machine) outputOf(i int) (linearize.LeaseOutput, bool) {
	m.rec.mu.Lock()
	defer m.rec.mu.Unlock()
	return m.rec.lock[i].Output, m.rec.lock[i].Unknown
}

// crash stops c without unlocking: its lease is left to expire, an
// operation in progress is cancelled where it stands (a request it had not
// sent is never sent).
func (m *machine) crash(c *client) {
	if o := c.op; o != nil {
		m.sched.crash(o)
		fin := c.fin
		c.op, c.fin = nil, nil
		m.sched.forget(o)
		m.doubt()
		fin()
	}
	cr, crasher := c.locker.(Crasher)
	if c.cur != nil {
		m.doubt()
		if crasher {
			// Its connections are cut: a lease held by a connection or a
			// session ends with them.
			m.rec.crashedHolder(c.id, m.o.Name, c.cur.owner)
		}
	}
	c.cur, c.work, c.stale, c.inner = nil, nil, nil, nil
	if crasher {
		// Its connections and keep-alives die with it (see Crasher).
		cr.Crash()
	}
	if (crasher || m.o.Reentrant) && c != m.probe && m.fatal == nil {
		// The process restarts: its holds, which an owner's Locker keeps
		// in the client, are gone with it, and so are the connections a
		// Crasher cut.
		m.fatal = m.newLocker(c, true)
	}
}

// beginWork reads the register for c's lease: the first half of the
// holder's read-modify-write. Every grant starts one; a holder writes
// (FinishWork) before it unlocks, and time may pass in between.
func (m *machine) beginWork(c *client) {
	h := c.cur
	if m.o.Permits > 1 || h.shared {
		return // N holders, or readers, may interleave their writes: the register checks a mutex only
	}
	v, writes, ok := m.reg.read(h.token, h.fenced)
	m.rec.register(c.id, linearize.FencedInput[int]{Op: linearize.Read, Token: h.token},
		linearize.FencedOutput[int]{OK: ok, Value: v}, h.fenced)
	if ok {
		c.work = &work{h: h, read: v, writes: writes}
	}
	m.logf("client %d: read token %d -> %d admitted=%v", c.id, h.token, v, ok)
}

// finishWork writes read+1: the second half. Time may have passed since
// the read (a pause) and the lease may have run out meanwhile: that is the
// case fencing exists for.
func (m *machine) finishWork(c *client) {
	w := c.work
	c.work = nil
	late := !m.be.Clock.Now().Before(w.h.lease.Deadline())
	ok := m.reg.write(w.h.token, w.h.fenced, w.read, w.writes, lostUpdate{
		client: c.id, token: w.h.token, fenced: w.h.fenced, at: m.rec.now(), late: late,
	})
	m.rec.register(c.id, linearize.FencedInput[int]{Op: linearize.Write, Token: w.h.token, Value: w.read + 1},
		linearize.FencedOutput[int]{OK: ok}, w.h.fenced)
	m.logf("client %d: write token %d <- %d admitted=%v late=%v", c.id, w.h.token, w.read+1, ok, late)
}

// advance moves the backend's time and lets the clients react.
func (m *machine) advance(d time.Duration) {
	m.sched.holdUp()
	m.be.Advance(d)
	m.sched.settle()
	m.collect()
}

// toggleFault injects fault i, or heals it when it is active.
func (m *machine) toggleFault(i int) error {
	f := m.be.Faults[i]
	if m.active[i] {
		m.logf("heal %s", f.Name)
		delete(m.active, i)
		m.faultEvents++
		err := f.Heal()
		m.sched.settle()
		m.collect()
		return err
	}
	m.logf("inject %s", f.Name)
	m.faulted, m.used[i] = true, true
	m.faultEvents++
	if !m.o.claims(f.Kind) {
		m.unclaimed[f.Name+" ("+string(f.Kind)+")"] = true
	}
	if err := f.Inject(); err != nil {
		return fmt.Errorf("propertytest: inject %s: %w", f.Name, err)
	}
	if f.Heal != nil {
		m.active[i] = true
	}
	m.sched.settle()
	m.collect()
	return nil
}

// actions returns the state machine's actions for rapid's Repeat.
func (m *machine) actions() map[string]func(*rapid.T) {
	pick := func(t *rapid.T, ok func(c *client) bool) *client {
		if m.fatal != nil {
			t.Fatalf("%v", m.fatal)
		}
		var ids []int
		for _, c := range m.cl {
			if ok(c) {
				ids = append(ids, c.id)
			}
		}
		if len(ids) == 0 {
			t.Skip("no client can do this now")
		}
		return m.cl[rapid.SampledFrom(ids).Draw(t, "client")]
	}
	free := func(c *client) bool { return c.cur == nil && c.op == nil }
	idle := func(c *client) bool { return c.cur != nil && c.op == nil }
	acts := map[string]func(*rapid.T){
		"": func(*rapid.T) { m.collect() },
		"Lock": func(t *rapid.T) {
			c := pick(t, free)
			m.drawMode(t, c)
			m.acquire(c, true, false, drawStall(t), nil)
			m.drive(c)
		},
		"TryLock": func(t *rapid.T) {
			c := pick(t, free)
			m.drawMode(t, c)
			m.acquire(c, false, false, drawStall(t), nil)
			m.drive(c)
		},
		"Unlock": func(t *rapid.T) {
			c := pick(t, func(c *client) bool { return idle(c) && c.work == nil && len(c.inner) == 0 })
			h := c.cur
			m.release(c, h, true, drawStall(t), func(err error) {
				m.logf("client %d: Unlock token %d -> %v", c.id, h.token, err)
				if c.cur == h {
					c.cur, c.work = nil, nil
				}
				m.checkFreed(c, err)
			})
			m.drive(c)
		},
		"Renew": func(t *rapid.T) {
			c := pick(t, idle)
			h := c.cur
			m.release(c, h, false, drawStall(t), func(err error) {
				m.logf("client %d: Renew token %d -> %v", c.id, h.token, err)
				m.checkRenewLoss(c, h, err)
			})
			m.drive(c)
		},
		"Resume": func(t *rapid.T) {
			c := pick(t, func(c *client) bool { return c.op != nil && m.sched.stalled(c.op) })
			m.logf("client %d: resume its %s", c.id, c.op.name)
			m.sched.resume(c.op, c.op.name == "Lock")
			m.sched.settle()
			m.collect()
		},
		"Overtake":      func(t *rapid.T) { m.overtake(t, pick) },
		"StallOvertake": func(t *rapid.T) { m.stallOvertake(t, pick) },
		"SlowGrant":     func(t *rapid.T) { m.slowGrant(t, pick) },
		"Edge":          func(t *rapid.T) { m.edge(t, pick) },
		"ForeignUnlock": func(t *rapid.T) { m.foreign(t, pick, true) },
		"ForeignRenew":  func(t *rapid.T) { m.foreign(t, pick, false) },
		"BeginWork": func(t *rapid.T) {
			m.beginWork(pick(t, func(c *client) bool { return m.valid(c.cur) && c.work == nil && c.op == nil }))
		},
		"FinishWork": func(t *rapid.T) {
			m.finishWork(pick(t, func(c *client) bool { return c.work != nil }))
		},
		"Crash": func(t *rapid.T) {
			c := pick(t, func(c *client) bool { return c.cur != nil || c.op != nil })
			m.logf("client %d: crash", c.id)
			m.crash(c)
			m.sched.settle()
			m.collect()
		},
		"CrashInTryLock": func(t *rapid.T) {
			c := pick(t, free)
			m.drawMode(t, c)
			m.acquire(c, false, true, stallNever, nil)
			m.drive(c)
		},
		"Advance": func(t *rapid.T) {
			d := rapid.SampledFrom([]time.Duration{m.o.TTL / 10, m.o.TTL / 3, m.o.TTL + m.o.Slack}).Draw(t, "by")
			m.logf("advance %v", d)
			m.advance(d)
		},
	}
	if m.o.Reentrant {
		acts["Reenter"] = func(t *rapid.T) {
			c := pick(t, func(c *client) bool { return idle(c) && m.valid(c.cur) && len(c.inner) < maxInner })
			m.reenter(c, rapid.Bool().Draw(t, "blocking"))
		}
		acts["UnlockInner"] = func(t *rapid.T) {
			m.unlockInner(pick(t, func(c *client) bool { return len(c.inner) > 0 && c.op == nil }))
		}
	}
	if len(m.be.Faults) > 0 {
		acts["Fault"] = func(t *rapid.T) {
			i := rapid.IntRange(0, len(m.be.Faults)-1).Draw(t, "fault")
			if m.used[i] && m.be.Faults[i].Heal == nil {
				t.Skip("fault cannot be undone")
			}
			if err := m.toggleFault(i); err != nil {
				t.Fatalf("%v", err)
			}
		}
	}
	return acts
}

// overtake lets a stalled client's lease run out while it is stalled,
// another client take the lock, and then the stalled operation go on:
// a renewal or release that reaches the backend late, or an acquisition
// whose reply comes back late. Time moves either to just after the
// backend let the stalled client's lease go (its deadline plus the drift
// allowance plus a hair), or by TTL + Slack (a backend that frees a lock
// later, as Consul with its lock-delay). A stalled acquisition may also
// be overtaken at once, with no time passing: an acquisition that checks
// in one request and claims in the next (a reader that checks for a
// writer, then joins) races the intruder only so. Had the run's time
// moved by TTL + Slack first, the stalled grant could linearize at its
// call and lapse before the intruder's, and the two holders would look
// legal.
func (m *machine) overtake(t *rapid.T, pick func(*rapid.T, func(*client) bool) *client) {
	c := pick(t, func(c *client) bool { return c.op != nil && m.sched.stalled(c.op) })
	m.overtakeStalled(t, c)
}

// overtakeStalled is overtake for c, whose operation is stalled.
func (m *machine) overtakeStalled(t *rapid.T, c *client) {
	what := c.op.name
	by := m.o.TTL + m.o.Slack
	switch {
	case c.cur != nil && rapid.Bool().Draw(t, "right after the backend's expiry"):
		by = c.cur.lease.Deadline().Sub(m.be.Clock.Now()) + locks.Drift(m.o.TTL) + m.o.TTL/100
	case c.cur == nil && rapid.Bool().Draw(t, "overtake at once"):
		by = 0
	}
	if by > 0 {
		m.logf("client %d stalls in %s while its lease runs out", c.id, what)
		m.advance(by)
	} else {
		m.logf("client %d stalls in %s and is overtaken at once", c.id, what)
	}
	m.intrude(c, "while client %d stalls")
	if c.op == nil { // it gave up on its own meanwhile (a timeout of wall time)
		return
	}
	late := what == "Unlock" || what == "Renew"
	if holder := m.holder(); late && holder != nil && holder != c && !m.probeRefused(holder) {
		late = false // the lock was not exclusive before the late call: nothing to blame on it
	}
	m.logf("client %d: resume its %s", c.id, what)
	m.sched.resume(c.op, what == "Lock")
	m.sched.settle()
	m.collect()
	if !late {
		return // a late acquisition is the grant checks' business
	}
	if holder := m.holder(); holder != nil && holder != c {
		m.checkSymmetry(fmt.Sprintf("client %d's %s, stalled until its lease ran out and resumed", c.id, what), holder)
	}
}

// stallOvertake starts an Unlock, a Renew or a TryLock for a client that
// stops at a drawn gate (0: the first point or request; 1 and 2: after
// the first or second request went), then overtakes it: the
// interleaving a check-then-act over two requests, or a renewal held up
// in the network, needs.
func (m *machine) stallOvertake(t *rapid.T, pick func(*rapid.T, func(*client) bool) *client) {
	c := pick(t, func(c *client) bool { return c.op == nil })
	at := rapid.IntRange(0, 3).Draw(t, "stall at gate")
	switch {
	case c.cur == nil:
		m.drawMode(t, c)
		m.acquire(c, false, false, at, nil)
	case rapid.Bool().Draw(t, "unlock") && len(c.inner) == 0:
		if c.work != nil {
			m.finishWork(c)
		}
		h := c.cur
		m.release(c, h, true, at, func(err error) {
			m.logf("client %d: Unlock token %d -> %v", c.id, h.token, err)
			if c.cur == h {
				c.cur, c.work = nil, nil
			}
			m.checkFreed(c, err)
		})
	default:
		h := c.cur
		// A renewal sent at its grant's instant extends nothing: the
		// stalled renewal that lands on another client's key only shows
		// when, taking effect at its call, it would have kept the lease
		// past the intruder's grant. A watchdog renews part way into the
		// lease; so does this renewal, at times.
		if rem := h.lease.Deadline().Sub(m.be.Clock.Now()); rem > m.o.TTL/2 && rapid.Bool().Draw(t, "renew part way into the lease") {
			m.logf("advance %v: client %d renews with half its lease left", rem/2, c.id)
			m.advance(rem / 2)
		}
		m.release(c, h, false, at, func(err error) {
			m.logf("client %d: Renew token %d -> %v", c.id, h.token, err)
			m.checkRenewLoss(c, h, err)
		})
	}
	m.drive(c)
	if c.op != nil && m.sched.stalled(c.op) {
		m.overtakeStalled(t, c)
	}
}

// slowGrant stalls an acquisition at a drawn gate after its first
// request, lets a fraction of the TTL pass, lets it finish, then probes at
// the new holder's deadline: a lease reckoned from the reply rather than
// from the request ends later than the backend's.
func (m *machine) slowGrant(t *rapid.T, pick func(*rapid.T, func(*client) bool) *client) {
	c := pick(t, func(c *client) bool { return c.cur == nil && c.op == nil })
	at := rapid.IntRange(1, 3).Draw(t, "stall at gate")
	m.drawMode(t, c)
	m.acquire(c, false, false, at, nil)
	m.drive(c)
	if c.op == nil || !m.sched.stalled(c.op) {
		return
	}
	d := rapid.SampledFrom([]time.Duration{m.o.TTL / 10, m.o.TTL / 3, m.o.TTL / 2}).Draw(t, "reply late by")
	m.logf("client %d: its TryLock's reply is %v late", c.id, d)
	m.advance(d)
	if c.op == nil {
		return
	}
	m.sched.resume(c.op, false)
	m.sched.settle()
	m.collect()
	if m.valid(c.cur) {
		m.edgeOf(t, c)
	}
}

// edge moves time to just before or just after a holder's local deadline
// and probes there: another client's TryLock (granted while the holder
// still believes it holds is a violation) and the holder's fenced write.
func (m *machine) edge(t *rapid.T, pick func(*rapid.T, func(*client) bool) *client) {
	m.edgeOf(t, pick(t, func(c *client) bool { return m.valid(c.cur) && c.op == nil }))
}

// edgeOf is edge for the holder c.
func (m *machine) edgeOf(t *rapid.T, c *client) {
	eps := rapid.SampledFrom([]time.Duration{-m.o.TTL / 20, -m.o.TTL / 200, -time.Millisecond / 10, 0, m.o.TTL / 200}).Draw(t, "edge")
	left := c.cur.lease.Deadline().Sub(m.be.Clock.Now()) + eps
	if left > 0 {
		m.logf("advance %v to client %d's deadline %+v", left, c.id, eps)
		m.advance(left)
	}
	m.intrude(c, "at client %d's deadline "+fmt.Sprintf("%+v", eps))
	if c.work != nil {
		m.finishWork(c)
	}
}

// intrude makes the first free client other than c try the lock, and take
// it if granted; when says when, with a %d for c.
func (m *machine) intrude(c *client, when string) {
	for _, d := range m.cl {
		if d == c || d.cur != nil || d.op != nil {
			continue
		}
		h, err := m.tryLock(d)
		if h != nil {
			m.take(d, h)
		}
		m.logf("client %d: TryLock "+when+" -> %v", d.id, c.id, errOr(err, h))
		return
	}
}

func errOr(err error, h *held) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("granted, token %d", h.token)
}

// maxInner bounds the nested holds a client takes on one acquisition.
const maxInner = 3

// reenter takes a nested hold on c's acquisition (Options.Reentrant),
// through Lock when blocking, else TryLock, to its end, and checks that it
// came back at once on the same acquisition: the same fencing token (or,
// without fencing, the same deadline). Nothing is recorded in the lock
// history: re-entry is the client's own business.
func (m *machine) reenter(c *client, blocking bool) {
	h := c.cur
	locker, name := c.locker, "TryLock"
	if h.shared {
		locker = c.reader
	}
	if blocking {
		name = "Lock"
	}
	var lease locks.Lease
	var err error
	c.op = m.sched.start(c.id, "Reenter", m.o.OpTimeout, stallNever, func(ctx context.Context) {
		if blocking {
			lease, err = locker.Lock(ctx)
		} else {
			lease, err = locker.TryLock(ctx)
		}
	})
	c.fin = func() {
		switch {
		case err != nil && !m.valid(h):
			m.logf("client %d: nested %s -> %v, its acquisition (token %d) having ended", c.id, name, err, h.token)
		case err != nil:
			m.ran[DeadlockFreedom] = true
			m.violate(DeadlockFreedom, false, fmt.Sprintf(
				"client %d holds the lock (token %d, valid until t=%v) and its owner's nested %s was refused: %v; an owner must re-enter its own acquisition",
				c.id, h.token, m.since(h.lease.Deadline()), name, err))
		case !sameAcquisition(h, lease):
			m.ran[Exclusivity] = true
			tok, _ := lease.Token()
			m.violate(Exclusivity, false, fmt.Sprintf(
				"client %d holds the lock (token %d) and its owner's nested %s came back with another acquisition (token %d, deadline t=%v against t=%v): two acquisitions held at once",
				c.id, h.token, name, tok, m.since(lease.Deadline()), m.since(h.lease.Deadline())))
			c.inner = append(c.inner, lease)
		default:
			m.logf("client %d: nested %s -> hold %d on token %d", c.id, name, len(c.inner)+1, h.token)
			c.inner = append(c.inner, lease)
		}
	}
	m.now(c)
}

// sameAcquisition reports whether nested, a hold returned by re-entry, is
// on h's acquisition: the same fencing token when h is fenced, else the
// same deadline.
func sameAcquisition(h *held, nested locks.Lease) bool {
	tok, fenced := nested.Token()
	if h.fenced || fenced {
		return fenced == h.fenced && uint64(tok) == h.token
	}
	return nested.Deadline().Equal(h.lease.Deadline())
}

// unlockInner unlocks c's innermost nested hold, to its end, and checks
// that c's acquisition is still held by its outer hold if it was valid
// before.
func (m *machine) unlockInner(c *client) {
	h, inner := c.cur, c.inner[len(c.inner)-1]
	c.inner = c.inner[:len(c.inner)-1]
	wasValid := m.valid(h)
	var err error
	c.op = m.sched.start(c.id, "UnlockInner", m.o.OpTimeout, stallNever, func(ctx context.Context) { err = inner.Unlock(ctx) })
	c.fin = func() {
		m.logf("client %d: Unlock of nested hold %d -> %v", c.id, len(c.inner)+1, err)
		if !wasValid || h == nil {
			return
		}
		m.ran[Exclusivity] = true
		if closed(h.lease.Done()) || h.lease.Err() != nil {
			m.violate(Exclusivity, false, fmt.Sprintf(
				"client %d's Unlock of a nested hold ended its acquisition (token %d; Err=%v) while its outer hold was still held: the lock is free to others under the owner's outer hold",
				c.id, h.token, h.lease.Err()))
		}
	}
	m.now(c)
}
