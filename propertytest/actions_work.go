package propertytest

import (
	"github.com/lockproof/lockproof/linearize"
	"pgregory.net/rapid"
)

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

// workActions are the two halves of a holder's read-modify-write of the
// shared register, with time free to pass in between.
var workActions = []action{
	{name: "BeginWork", who: func(m *machine, c *client) bool { return m.valid(c.cur) && c.work == nil && c.op == nil },
		do: func(m *machine, _ *rapid.T, c *client) { m.beginWork(c) }},
	{name: "FinishWork", who: func(_ *machine, c *client) bool { return c.work != nil },
		do: func(m *machine, _ *rapid.T, c *client) { m.finishWork(c) }},
}
