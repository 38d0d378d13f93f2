package propertytest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/lockproof/lockproof/linearize"
	"github.com/lockproof/lockproof/locks"
)

// acquisition is one Lock or TryLock of a client: what acquire set up, what
// the call returned, and what the driver makes of it.
type acquisition struct {
	m        *machine
	c        *client
	i        int    // the call's operation in the lock history
	owner    uint64 // the suite's name for the acquisition
	events   int    // m.faults.events at the call
	locker   locks.Locker
	shared   bool
	blocking bool
	crash    bool   // die at locks.PointAcquired (CrashInTryLock)
	name     string // "Lock" or "TryLock"
	synth    *synthSlot
	onGrant  func(h *held) // nil: c takes the grant
	o        *op

	// Set by call on the operation's goroutine; read by finished once the
	// operation finished.
	lease    locks.Lease
	err      error
	returned bool // false: it died at PointAcquired, or was crashed
}

// acquire starts an acquisition for c: Lock (blocking) or TryLock, the
// latter dying at locks.PointAcquired when crash is set. The outcome is
// recorded when the call returns; the driver's part (finished) runs once it
// finished: a granted lease goes to onGrant, or to take when it is nil.
func (m *machine) acquire(c *client, blocking, crash bool, stallAt int, onGrant func(h *held)) *op {
	a := &acquisition{m: m, c: c, owner: m.newOwner(), blocking: blocking, crash: crash, onGrant: onGrant}
	a.i = m.rec.call(c.id, linearize.Acquire, m.o.Name, a.owner)
	a.events = m.faults.events
	a.locker, a.shared = c.locker, c.read
	if a.shared {
		a.locker, c.read = c.reader, false
		m.rec.shared(a.i)
	}
	var budget time.Duration
	a.name, budget = "TryLock", m.o.OpTimeout
	if blocking {
		a.name, budget = "Lock", 0
	}
	a.synth = &synthSlot{next: m.rec.syntheticToken, now: m.rec.now}
	a.o = m.sched.start(c.id, a.name, budget, stallAt, a.call)
	c.op, c.fin = a.o, a.finished
	return a.o
}

// call is the operation, on its own goroutine: the Lock or TryLock, and the
// record of what it returned.
func (a *acquisition) call(ctx context.Context) {
	ctx = context.WithValue(ctx, synthKey{}, a.synth)
	if a.crash {
		ctx = context.WithValue(ctx, crashKey{}, true)
	}
	if a.blocking {
		a.lease, a.err = a.locker.Lock(ctx)
	} else {
		a.lease, a.err = a.locker.TryLock(ctx)
	}
	a.returned = true
	out, unknown := acquireOutcome(a.lease, a.err, a.synth.take)
	if out.OK && !unknown {
		out.Deadline = a.m.rec.deadline(a.lease.Deadline())
	}
	a.m.rec.ret(a.i, out, unknown)
}

// finished is the driver's part (c.fin), run once the operation finished,
// when the outcome is known, on the driver, which owns the run's state.
func (a *acquisition) finished() {
	defer a.recordLate() // whichever way the outcome went
	if !a.returned {
		a.diedAtGrant()
		return
	}
	a.outcome()
}

// outcome takes in what the call returned: a refusal or an unknown outcome
// is logged (and a refusal of a free lock probed), a grant is taken.
func (a *acquisition) outcome() {
	m, c := a.m, a.c
	out, unknown := m.outputOf(a.i)
	m.findings.count(a.name, a.err, true, m.sched.crashed(a.o))
	if unknown {
		m.doubt()
		if m.sched.crashed(a.o) {
			m.rec.cleanedUp(a.i)
		}
	}
	if !out.OK || unknown {
		m.logf("client %d: %s -> %v", c.id, a.name, a.err)
		if !a.blocking && !unknown && c != m.probe && m.lockFree(c) {
			m.checks.refusedFree(c, a.owner)
		}
		return
	}
	h := m.held(a.lease, a.owner, out)
	h.shared, h.faultEvents = a.shared, a.events
	m.fenced = -1
	if h.fenced {
		m.fenced = 1
	}
	m.logf("client %d: %s%s -> granted, token %d", c.id, a.name, mode(a.shared), out.Token)
	if a.onGrant == nil {
		m.take(c, h)
		return
	}
	a.onGrant(h)
}

// diedAtGrant records a client that died at PointAcquired, granted with the
// reported (or synthetic) token; until a returned lease tells whether the
// lock is fenced, the grant stays of unknown outcome.
func (a *acquisition) diedAtGrant() {
	m, c, synth := a.m, a.c, a.synth
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
	m.rec.ret(a.i, out, !known)
	if _, crasher := c.locker.(Crasher); crasher {
		m.rec.cleanedUp(a.i) // its lease may end with its connections (crashedHolder)
	}
	m.findings.count(a.name, nil, true, true)
	m.doubt()
	m.logf("client %d: crashed inside %s at %v", c.id, a.name, locks.PointAcquired)
	m.crash(c)
}

// recordLate adds to the history the grants the lock gave back within the
// call, and a claim the call may have lost unseen.
func (a *acquisition) recordLate() {
	m := a.m
	for _, g := range a.synth.late {
		// The reported token stands for the grant only if a returned lease
		// showed the lock fenced; until then the grant given back is of
		// unknown outcome.
		if m.fenced != 1 {
			g.token = 0
		}
		m.rec.gaveBack(a.i, m.newOwner(), g)
		m.logf("client %d: %s gave back a grant that came too late (token %d)", a.c.id, a.name, g.token)
	}
	// A claim lost unseen hides behind a known outcome that is not itself
	// that claim: a refusal, or a Lock's grant (made by a later attempt).
	// An unknown outcome already stands for it, and a TryLock's grant is
	// its one claim: another acquire of unknown outcome would only cost the
	// checker time (a read-write history under -race ran out of it).
	if a.returned && m.sched.wasHeldUp(a.o) {
		if out, unknown := m.outputOf(a.i); !unknown && (!out.OK || a.blocking) {
			m.rec.heldUp(a.i, m.newOwner())
		}
	}
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
	m.checks.granted(c, h)
	c.cur = h
	m.beginWork(c)
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

// acquireActions are the acquisitions: a blocking Lock and a TryLock, each
// by a client that holds nothing, drawn shared or not (Options.ReadWrite)
// and stalled or not.
var acquireActions = []action{
	{name: "Lock", who: free, acquires: true, do: func(m *machine, t *rapid.T, c *client) {
		m.drawMode(t, c)
		m.acquire(c, true, false, drawStall(t), nil)
		m.drive(c)
	}},
	{name: "TryLock", who: free, acquires: true, do: func(m *machine, t *rapid.T, c *client) {
		m.drawMode(t, c)
		m.acquire(c, false, false, drawStall(t), nil)
		m.drive(c)
	}},
}

// strikeAtAcquire draws whether a fault marked AtAcquire (and not active,
// and whose StrikeWhen the lock's state meets) strikes around the
// acquisition an action is about to start, injects it
// if so, and returns what heals it once the action is done and then
// contends (contendAfter). A backend without such a fault draws
// nothing, so its seeds replay as before.
func (m *machine) strikeAtAcquire(t *rapid.T) (heal func()) {
	full := len(m.fullHolders()) > 0
	free := !slices.ContainsFunc(m.cl, m.believes)
	var at []int
	for i, f := range m.be.Faults {
		if !f.AtAcquire || m.faults.active[i] ||
			f.StrikeWhen == StrikeFree && !free || f.StrikeWhen == StrikeHeld && !full {
			continue
		}
		at = append(at, i)
	}
	if len(at) == 0 || !rapid.Bool().Draw(t, "fault at the acquisition") {
		return func() {}
	}
	i := rapid.SampledFrom(at).Draw(t, "which fault at the acquisition")
	if err := m.toggleFault(i); err != nil {
		t.Fatalf("%v", err)
	}
	return func() {
		if !m.faults.active[i] {
			return
		}
		if err := m.toggleFault(i); err != nil {
			t.Fatalf("%v", err)
		}
		m.contendAfter()
	}
}

// contendAfter contends for the lock at once when a fault marked AtAcquire
// has healed and the lock is held (its full holders): the probe's TryLock,
// recorded in the history and released if granted. Such a fault may have
// lost a grant made while it was on (a failover to a replica that never
// saw it), and that loss breaks the lock only if another client is granted
// the lock while the holder still trusts its lease; without this, that
// needs a later step to acquire before the holder lets go, which half the
// runs on a real cluster never drew. A correct lock refuses the probe; a
// grant is judged by the history's checks, as any other. No draw: seeds
// replay the same steps. Its callers are the heals of the run's steps and
// finish's, not toggleFault: the end probes' nemesis heals faults too,
// while the probe itself may hold the lock.
func (m *machine) contendAfter() {
	hs := m.fullHolders()
	if len(hs) == 0 {
		return
	}
	h, err := m.tryLock(m.probe)
	if h == nil {
		m.logf("contention after the heal: the probe's TryLock -> %v", err)
		return
	}
	held := make([]string, len(hs))
	for i, c := range hs {
		held[i] = fmt.Sprintf("client %d (token %d)", c.id, c.cur.token)
	}
	m.logf("contention after the heal: the probe was granted the lock (token %d) while %s held it", h.token, strings.Join(held, " and "))
	_ = m.unlock(m.probe, h) // recorded; its result is part of the history
}

// free is an action's who for a client that holds nothing and runs nothing.
func free(_ *machine, c *client) bool { return c.free() }
