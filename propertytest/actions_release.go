package propertytest

import (
	"context"
	"fmt"

	"github.com/lockproof/lockproof/linearize"
	"pgregory.net/rapid"
)

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
		m.findings.count(name, err, false, m.sched.crashed(o))
		m.checks.released(c, h, rc, o, err)
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

// foreign makes a client call Unlock (or Renew) through a lease of its own
// that ran out, while another client holds the lock; then checks symmetry.
func (m *machine) foreign(t *rapid.T, unlock bool) {
	holder := m.holder()
	if holder == nil {
		t.Skip("nobody holds the lock")
	}
	c := m.pick(t, func(c *client) bool { return c != holder && len(c.stale) > 0 && c.op == nil })
	h := c.stale[rapid.IntRange(0, len(c.stale)-1).Draw(t, "stale lease")]
	if !m.checks.beforeForeign(holder) {
		return // the lock was not exclusive before the foreign call: nothing to blame on it
	}
	m.doubt()
	var err error
	what := "Renew"
	if unlock {
		what = "Unlock"
		err = m.unlock(c, h)
	} else {
		err = m.renew(c, h)
	}
	m.logf("client %d: foreign %s with stale token %d -> %v", c.id, what, h.token, err)
	m.checks.afterForeign(fmt.Sprintf("client %d's %s through its stale lease (token %d, owner %d)", c.id, what, h.token, h.owner), holder)
}

// releaseActions are the holder's Unlock and Renew, and the foreign calls:
// an Unlock or Renew through a lease that ran out, while another client
// holds the lock.
var releaseActions = []action{
	{name: "Unlock", who: func(_ *machine, c *client) bool { return c.idle() && c.work == nil && len(c.inner) == 0 },
		do: func(m *machine, t *rapid.T, c *client) {
			m.release(c, c.cur, true, drawStall(t), m.unlocked(c, c.cur))
			m.drive(c)
		}},
	{name: "Renew", who: idle, do: func(m *machine, t *rapid.T, c *client) {
		m.release(c, c.cur, false, drawStall(t), m.renewed(c, c.cur))
		m.drive(c)
	}},
	{name: "ForeignUnlock", do: func(m *machine, t *rapid.T, _ *client) { m.foreign(t, true) }},
	{name: "ForeignRenew", do: func(m *machine, t *rapid.T, _ *client) { m.foreign(t, false) }},
}

// idle is an action's who for a holder that runs nothing.
func idle(_ *machine, c *client) bool { return c.idle() }

// unlocked is what the driver does when c's Unlock of its lease h
// returned: c lets go of h and the live checks look at the freed lock.
func (m *machine) unlocked(c *client, h *held) func(err error) {
	return func(err error) {
		m.logf("client %d: Unlock token %d -> %v", c.id, h.token, err)
		if c.cur == h {
			c.cur, c.work = nil, nil
		}
		m.checks.unlocked(c, err)
	}
}

// renewed is what the driver does when c's Renew of its lease h returned.
func (m *machine) renewed(c *client, h *held) func(err error) {
	return func(err error) {
		m.logf("client %d: Renew token %d -> %v", c.id, h.token, err)
		m.checks.renewed(c, h, err)
	}
}
