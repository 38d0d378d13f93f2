package propertytest

import (
	"context"

	"github.com/lockproof/lockproof/locks"
	"pgregory.net/rapid"
)

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
	// The driver's part runs once the call returned: m.now below runs it
	// to its end, and collect then calls it on the driver.
	c.fin = func() {
		if err != nil && !m.valid(h) {
			m.logf("client %d: nested %s -> %v, its acquisition (token %d) having ended", c.id, name, err, h.token)
			return
		}
		m.checks.reentered(c, h, name, lease, err)
		if err != nil {
			return
		}
		if sameAcquisition(h, lease) {
			m.logf("client %d: nested %s -> hold %d on token %d", c.id, name, len(c.inner)+1, h.token)
		}
		c.inner = append(c.inner, lease)
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
		m.checks.innerUnlocked(c, h)
	}
	m.now(c)
}

// reentryActions are a holder's nested holds on its own acquisition, with
// Options.Reentrant.
var reentryActions = []action{
	{name: "Reenter", on: reentrant,
		who: func(m *machine, c *client) bool { return c.idle() && m.valid(c.cur) && len(c.inner) < maxInner },
		do:  func(m *machine, t *rapid.T, c *client) { m.reenter(c, rapid.Bool().Draw(t, "blocking")) }},
	{name: "UnlockInner", on: reentrant,
		who: func(_ *machine, c *client) bool { return len(c.inner) > 0 && c.op == nil },
		do:  func(m *machine, _ *rapid.T, c *client) { m.unlockInner(c) }},
}

// reentrant is the on of the re-entry actions.
func reentrant(m *machine) bool { return m.o.Reentrant }
