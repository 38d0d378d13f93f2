package propertytest

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/locks"
	"pgregory.net/rapid"
)

// overtakeStalled lets a stalled client's lease run out while it is stalled,
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
	if holder := m.holder(); late && holder != nil && holder != c && !m.checks.beforeForeign(holder) {
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
		m.checks.afterForeign(fmt.Sprintf("client %d's %s, stalled until its lease ran out and resumed", c.id, what), holder)
	}
}

// stallOvertake starts an Unlock, a Renew or a TryLock for a client that
// stops at a drawn gate (0: the first point or request; 1 and 2: after
// the first or second request went), then overtakes it: the
// interleaving a check-then-act over two requests, or a renewal held up
// in the network, needs.
func (m *machine) stallOvertake(t *rapid.T, c *client) {
	at := rapid.IntRange(0, 3).Draw(t, "stall at gate")
	switch {
	case c.cur == nil:
		m.drawMode(t, c)
		m.acquire(c, false, false, at, nil)
	case rapid.Bool().Draw(t, "unlock") && len(c.inner) == 0:
		if c.work != nil {
			m.finishWork(c)
		}
		m.release(c, c.cur, true, at, m.unlocked(c, c.cur))
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
		m.release(c, h, false, at, m.renewed(c, h))
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
func (m *machine) slowGrant(t *rapid.T, c *client) {
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

// edgeOf moves time to just before or just after a holder's local deadline
// and probes there: another client's TryLock (granted while the holder
// still believes it holds is a violation) and the holder's fenced write.

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

// interleaveActions are the moves of time and of stalled operations: a
// stalled call resumed, or overtaken by another client once its lease ran
// out; a grant whose reply comes late; a probe at a holder's deadline; time
// moved on.
var interleaveActions = []action{
	{name: "Resume", who: stalled, do: func(m *machine, _ *rapid.T, c *client) {
		m.logf("client %d: resume its %s", c.id, c.op.name)
		m.sched.resume(c.op, c.op.name == "Lock")
		m.sched.settle()
		m.collect()
	}},
	{name: "Overtake", who: stalled, do: func(m *machine, t *rapid.T, c *client) { m.overtakeStalled(t, c) }},
	{name: "StallOvertake", who: func(_ *machine, c *client) bool { return c.op == nil }, acquires: true,
		do: func(m *machine, t *rapid.T, c *client) { m.stallOvertake(t, c) }},
	{name: "SlowGrant", who: free, acquires: true, do: func(m *machine, t *rapid.T, c *client) { m.slowGrant(t, c) }},
	{name: "Edge", who: func(m *machine, c *client) bool { return m.valid(c.cur) && c.op == nil },
		do: func(m *machine, t *rapid.T, c *client) { m.edgeOf(t, c) }},
	{name: "Advance", do: func(m *machine, t *rapid.T, _ *client) {
		d := rapid.SampledFrom([]time.Duration{m.o.TTL / 10, m.o.TTL / 3, m.o.TTL + m.o.Slack}).Draw(t, "by")
		m.logf("advance %v", d)
		m.advance(d)
	}},
}

// stalled is an action's who for a client whose operation is stalled.
func stalled(m *machine, c *client) bool { return c.op != nil && m.sched.stalled(c.op) }
