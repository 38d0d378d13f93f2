package propertytest

import (
	"fmt"

	"pgregory.net/rapid"
)

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

// toggleFault injects fault i, or heals it when it is active.
func (m *machine) toggleFault(i int) error {
	f := m.be.Faults[i]
	if m.faults.active[i] {
		m.logf("heal %s", f.Name)
		delete(m.faults.active, i)
		m.faults.events++
		err := f.Heal()
		m.sched.settle()
		m.collect()
		return err
	}
	m.logf("inject %s", f.Name)
	m.faults.faulted, m.faults.used[i] = true, true
	m.faults.events++
	if !m.o.claims(f.Kind) {
		m.faults.unclaimed[f.Name+" ("+string(f.Kind)+")"] = true
	}
	if err := f.Inject(); err != nil {
		return fmt.Errorf("propertytest: inject %s: %w", f.Name, err)
	}
	if f.Heal != nil {
		m.faults.active[i] = true
	}
	m.sched.settle()
	m.collect()
	return nil
}

// faultActions are the faults: a client's crash (anywhere, or inside a
// TryLock the backend granted) and the Backend's own faults.
var faultActions = []action{
	{name: "Crash", who: func(_ *machine, c *client) bool { return c.cur != nil || c.op != nil },
		do: func(m *machine, _ *rapid.T, c *client) {
			m.logf("client %d: crash", c.id)
			m.crash(c)
			m.sched.settle()
			m.collect()
		}},
	{name: "CrashInTryLock", who: free, acquires: true, do: func(m *machine, t *rapid.T, c *client) {
		m.drawMode(t, c)
		m.acquire(c, false, true, stallNever, nil)
		m.drive(c)
	}},
	{name: "Fault", on: func(m *machine) bool { return len(m.be.Faults) > 0 }, do: func(m *machine, t *rapid.T, _ *client) {
		i := rapid.IntRange(0, len(m.be.Faults)-1).Draw(t, "fault")
		if m.faults.used[i] && m.be.Faults[i].Heal == nil {
			t.Skip("fault cannot be undone")
		}
		healing := m.faults.active[i]
		if err := m.toggleFault(i); err != nil {
			t.Fatalf("%v", err)
		}
		if healing && m.be.Faults[i].AtAcquire {
			m.contendAfter()
		}
	}},
}
