package propertytest

import (
	"context"
	"errors"
	"fmt"
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
}

// pending is a Lock call running on its own goroutine.
type pending struct {
	op     int
	owner  uint64
	cancel context.CancelFunc
	done   chan struct{}
	lease  locks.Lease
	err    error
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
	cur    *held   // the lease it believes it holds
	stale  []*held // leases that ran out without an Unlock: used for foreign calls
	wait   *pending
	work   *work
}

// machine is one run of the state machine.
type machine struct {
	o     Options
	be    *Backend
	rec   *recorder
	reg   register
	cl    []*client
	probe *client // acquires on the suite's behalf for the named checks

	owners    uint64
	active    map[int]bool    // backend faults injected and not healed
	used      map[int]bool    // backend faults injected at least once
	unclaimed map[string]bool // unclaimed faults injected during the run
	faulted   bool            // some backend fault was injected
	found     []Violation
	ran       map[Property]bool // the named checks this run made
	log       []string
}

func newMachine(o Options, be *Backend) (*machine, error) {
	m := &machine{o: o, be: be, rec: newRecorder(be.Clock),
		active: map[int]bool{}, used: map[int]bool{}, ran: map[Property]bool{}, unclaimed: map[string]bool{}}
	for i := 0; i <= o.Clients; i++ {
		l, err := be.NewLocker(o.Name, locks.WithTTL(o.TTL), locks.WithWatchdog(false), locks.WithObserver(crashObserver{}))
		if err != nil {
			return nil, fmt.Errorf("propertytest: new locker for client %d: %w", i, err)
		}
		c := &client{id: i, locker: l}
		if i == o.Clients {
			m.probe = c
		} else {
			m.cl = append(m.cl, c)
		}
	}
	return m, nil
}

func (m *machine) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf("t=%v ", time.Duration(m.rec.now()))+fmt.Sprintf(format, args...))
}

func (m *machine) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), m.o.OpTimeout)
}

func (m *machine) newOwner() uint64 { m.owners++; return m.owners }

// valid reports whether h is within its lease's local deadline.
func (m *machine) valid(h *held) bool {
	return h != nil && h.lease.Err() == nil && m.be.Clock.Now().Before(h.lease.Deadline())
}

// held wraps a granted lease with its owner and model token.
func (m *machine) held(lease locks.Lease, owner uint64, out linearize.LeaseOutput) *held {
	_, fenced := lease.Token()
	return &held{lease: lease, owner: owner, token: out.Token, fenced: fenced}
}

// tryLock makes one attempt for c and records it.
func (m *machine) tryLock(c *client) (*held, error) {
	owner := m.newOwner()
	i := m.rec.call(c.id, linearize.Acquire, m.o.Name, owner)
	ctx, cancel := m.opCtx()
	defer cancel()
	lease, err := c.locker.TryLock(ctx)
	out, unknown := acquireOutcome(lease, err, m.rec.syntheticToken)
	m.rec.ret(i, out, unknown)
	if out.OK && !unknown {
		return m.held(lease, owner, out), nil
	}
	return nil, err
}

// crashKey marks the context of a TryLock that CrashInTryLock stops.
type crashKey struct{}

// crashObserver is the Observer the suite gives every Locker. At
// locks.PointAcquired, within a TryLock whose context carries crashKey, it
// ends the goroutine (runtime.Goexit): the client dies there, after the
// backend granted and before TryLock returned, and nothing the lock would
// do after that point happens. Everywhere else it does nothing.
type crashObserver struct{}

func (crashObserver) Observe(ctx context.Context, e locks.Event) {
	if e.Point == locks.PointAcquired && ctx.Value(crashKey{}) != nil {
		runtime.Goexit()
	}
}

// crashInTryLock makes c call TryLock and die at locks.PointAcquired if
// the lock reaches it (see crashObserver). The call runs on a goroutine of
// its own, the one that dies. A crashed acquisition has an unknown
// outcome and leaves c as crash leaves it; a TryLock that returned (it was
// refused, or the lock reports no PointAcquired) is taken as a TryLock.
func (m *machine) crashInTryLock(c *client) {
	owner := m.newOwner()
	i := m.rec.call(c.id, linearize.Acquire, m.o.Name, owner)
	ctx, cancel := m.opCtx()
	defer cancel()
	ctx = context.WithValue(ctx, crashKey{}, true)
	var lease locks.Lease
	var err error
	returned := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		lease, err = c.locker.TryLock(ctx)
		returned = true
	}()
	<-done
	if !returned {
		m.rec.ret(i, linearize.LeaseOutput{}, true)
		m.logf("client %d: crashed inside TryLock at %v", c.id, locks.PointAcquired)
		m.crash(c)
		return
	}
	out, unknown := acquireOutcome(lease, err, m.rec.syntheticToken)
	m.rec.ret(i, out, unknown)
	if out.OK && !unknown {
		c.cur = m.held(lease, owner, out)
		m.logf("client %d: TryLock (no crash point reached) -> granted, token %d", c.id, out.Token)
		m.beginWork(c)
		return
	}
	m.logf("client %d: TryLock (no crash point reached) -> %v", c.id, err)
}

// startLock calls Lock for c on its own goroutine.
func (m *machine) startLock(c *client) {
	owner := m.newOwner()
	p := &pending{owner: owner, done: make(chan struct{})}
	p.op = m.rec.call(c.id, linearize.Acquire, m.o.Name, owner)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	c.wait = p
	go func() {
		defer close(p.done)
		p.lease, p.err = c.locker.Lock(ctx)
		out, unknown := acquireOutcome(p.lease, p.err, m.rec.syntheticToken)
		m.rec.ret(p.op, out, unknown)
	}()
}

// settle gives blocked Locks up to Settle of wall time to return.
func (m *machine) settle() {
	var waiting []*pending
	for _, c := range m.cl {
		if c.wait != nil {
			waiting = append(waiting, c.wait)
		}
	}
	if len(waiting) == 0 {
		return
	}
	timer := time.NewTimer(m.o.Settle)
	defer timer.Stop()
	for _, p := range waiting {
		select {
		case <-p.done:
		case <-timer.C:
			return
		}
	}
}

// collect takes in the Locks that returned and retires leases that ran out.
func (m *machine) collect() {
	for _, c := range m.cl {
		if p := c.wait; p != nil {
			select {
			case <-p.done:
				c.wait = nil
				p.cancel()
				m.finishLock(c, p)
			default:
			}
		}
		if c.cur != nil && !m.valid(c.cur) {
			if c.cur.lease.Err() == nil || errors.Is(c.cur.lease.Err(), locks.ErrLeaseExpired) {
				c.stale = append(c.stale, c.cur)
			}
			c.cur = nil
		}
	}
}

func (m *machine) finishLock(c *client, p *pending) {
	out, unknown := m.outputOf(p.op)
	if out.OK && !unknown {
		c.cur = m.held(p.lease, p.owner, out)
		m.logf("client %d: Lock granted, token %d", c.id, out.Token)
		m.beginWork(c)
		return
	}
	m.logf("client %d: Lock returned %v", c.id, p.err)
}

func (m *machine) outputOf(i int) (linearize.LeaseOutput, bool) {
	m.rec.mu.Lock()
	defer m.rec.mu.Unlock()
	return m.rec.lock[i].Output, m.rec.lock[i].Unknown
}

// unlock and renew call the lease for client c (its own or a stale one)
// and record the call.
func (m *machine) unlock(c *client, h *held) error {
	i := m.rec.call(c.id, linearize.Release, m.o.Name, h.owner)
	ctx, cancel := m.opCtx()
	defer cancel()
	err := h.lease.Unlock(ctx)
	out, unknown := releaseOutcome(err)
	m.rec.ret(i, out, unknown)
	return err
}

func (m *machine) renew(c *client, h *held) error {
	i := m.rec.call(c.id, linearize.Renew, m.o.Name, h.owner)
	ctx, cancel := m.opCtx()
	defer cancel()
	err := h.lease.Renew(ctx)
	out, unknown := releaseOutcome(err)
	m.rec.ret(i, out, unknown)
	return err
}

// crash stops c without unlocking: its lease is left to expire, a pending
// Lock is cancelled (its waiter's clean-up is the lock's business).
func (m *machine) crash(c *client) {
	if p := c.wait; p != nil {
		p.cancel()
		<-p.done
		c.wait = nil
		m.finishLock(c, p)
	}
	c.cur, c.work, c.stale = nil, nil, nil
}

// beginWork reads the register for c's lease: the first half of the
// holder's read-modify-write. Every grant starts one; a holder writes
// (FinishWork) before it unlocks, and time may pass in between.
func (m *machine) beginWork(c *client) {
	h := c.cur
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

// advance moves the backend's time and lets blocked Locks react.
func (m *machine) advance(d time.Duration) {
	m.be.Advance(d)
	m.settle()
	m.collect()
}

// toggleFault injects fault i, or heals it when it is active.
func (m *machine) toggleFault(i int) error {
	f := m.be.Faults[i]
	if m.active[i] {
		m.logf("heal %s", f.Name)
		delete(m.active, i)
		return f.Heal()
	}
	m.logf("inject %s", f.Name)
	m.faulted, m.used[i] = true, true
	if !m.o.claims(f.Kind) {
		m.unclaimed[f.Name+" ("+string(f.Kind)+")"] = true
	}
	if err := f.Inject(); err != nil {
		return fmt.Errorf("propertytest: inject %s: %w", f.Name, err)
	}
	if f.Heal != nil {
		m.active[i] = true
	}
	return nil
}

// actions returns the state machine's actions for rapid's Repeat.
func (m *machine) actions() map[string]func(*rapid.T) {
	pick := func(t *rapid.T, ok func(c *client) bool) *client {
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
	free := func(c *client) bool { return c.cur == nil && c.wait == nil }
	acts := map[string]func(*rapid.T){
		"": func(*rapid.T) { m.collect() },
		"Lock": func(t *rapid.T) {
			c := pick(t, free)
			m.startLock(c)
			m.settle()
			m.collect()
		},
		"TryLock": func(t *rapid.T) {
			c := pick(t, free)
			h, err := m.tryLock(c)
			c.cur = h
			m.logf("client %d: TryLock -> %v", c.id, errOr(err, h))
			if h != nil {
				m.beginWork(c)
			}
		},
		"Unlock": func(t *rapid.T) {
			c := pick(t, func(c *client) bool { return c.cur != nil && c.work == nil })
			err := m.unlock(c, c.cur)
			m.logf("client %d: Unlock token %d -> %v", c.id, c.cur.token, err)
			c.cur, c.work = nil, nil
		},
		"Renew": func(t *rapid.T) {
			c := pick(t, func(c *client) bool { return c.cur != nil })
			err := m.renew(c, c.cur)
			m.logf("client %d: Renew token %d -> %v", c.id, c.cur.token, err)
		},
		"ForeignUnlock": func(t *rapid.T) { m.foreign(t, pick, true) },
		"ForeignRenew":  func(t *rapid.T) { m.foreign(t, pick, false) },
		"BeginWork": func(t *rapid.T) {
			m.beginWork(pick(t, func(c *client) bool { return m.valid(c.cur) && c.work == nil }))
		},
		"FinishWork": func(t *rapid.T) {
			m.finishWork(pick(t, func(c *client) bool { return c.work != nil }))
		},
		"Crash": func(t *rapid.T) {
			c := pick(t, func(c *client) bool { return c.cur != nil || c.wait != nil })
			m.logf("client %d: crash", c.id)
			m.crash(c)
		},
		"CrashInTryLock": func(t *rapid.T) {
			m.crashInTryLock(pick(t, free))
		},
		"Advance": func(t *rapid.T) {
			d := rapid.SampledFrom([]time.Duration{m.o.TTL / 10, m.o.TTL / 3, m.o.TTL + m.o.Slack}).Draw(t, "by")
			m.logf("advance %v", d)
			m.advance(d)
		},
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

func errOr(err error, h *held) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("granted, token %d", h.token)
}
