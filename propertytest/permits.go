package propertytest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockproof/lockproof/linearize"
	"github.com/lockproof/lockproof/locks"
)

// The suite's checks for a lock of Options.Permits > 1 leases at once (a
// semaphore), where they differ from a mutex's: the lock history's model,
// and exclusivity as "at most Permits holders".

// lockModel is the model a run's lock history is checked against: the
// semaphore model with Options.Permits > 1, the read-write lease model
// with Options.ReadWrite, else the lease model; each with the TTL and the
// drift the locks allow for as its tolerance.
func lockModel(o Options) linearize.Spec {
	s := linearize.Spec{Kind: linearize.KindLease, TTL: o.TTL, Tolerance: locks.Drift(o.TTL)}
	switch {
	case o.Permits > 1:
		s.Kind, s.Permits = linearize.KindSemaphore, o.Permits
	case o.ReadWrite:
		s.Kind = linearize.KindRWLock
	}
	return s
}

// modelName names the model the lock history is checked against, and how
// it reckons a lease, for a violation's detail.
func (m *machine) modelName() string {
	return m.model.String() + "; a grant holds until the deadline its holder was given, at most TTL less tolerance after its call, and a renewal for that long after its call"
}

// checkLockHistory checks the lock history against the run's model; a
// history that is not linearizable adds its violation to m.found. It
// returns the result and the evidence the named checks' findings carry
// (the whole history).
func (m *machine) checkLockHistory(ctx context.Context, h []lockOp) (linearize.Result, *Evidence, error) {
	opts := m.o.checkOptions()
	res, err := m.lock.Check(ctx, h, opts)
	if err != nil {
		return res, nil, fmt.Errorf("propertytest: checking the lock history: %w", err)
	}
	// A refusal of a free lock is tolerated up to maxSpurious times: the
	// history is judged without it.
	for spurious := 0; res.Verdict == linearize.Illegal && refusal(h, res.Blocker) && spurious < maxSpurious; spurious++ {
		op := h[res.Blocker]
		m.logf("the lock history refused client %d's acquire at t=%v while the lock was free (a spurious refusal): judged without it",
			op.ClientID, round(time.Duration(op.Call)))
		m.countSpurious(op.Input.Owner)
		h = without(h, res.Blocker)
		if res, err = m.lock.Check(ctx, h, opts); err != nil {
			return res, nil, fmt.Errorf("propertytest: checking the lock history: %w", err)
		}
	}
	ev := &Evidence{Model: m.model, Lease: h, Result: res, All: true}
	if res.Verdict == linearize.Illegal {
		v := lockIllegal(ctx, m, h, &res)
		e := *ev
		e.All, e.Expected = false, v.Expected
		v.Evidence = &e
		m.found = append(m.found, v) // after the named checks' findings, which came first in time
	}
	return res, ev, nil
}

// believers returns the clients that act as holders.
func (m *machine) believers() []*client {
	var bs []*client
	for _, c := range m.cl {
		if m.believes(c) {
			bs = append(bs, c)
		}
	}
	return bs
}

// checkGrantOfPermit is checkGrant with Options.Permits > 1: when c is
// granted h, fewer than Permits other clients may hold leases valid by
// their own deadlines.
func (m *machine) checkGrantOfPermit(c *client, h *held) {
	var others []*client
	for _, d := range m.believers() {
		if d != c {
			others = append(others, d)
		}
	}
	if len(others) < m.o.Permits {
		return
	}
	leases := []*held{h}
	for _, d := range others {
		leases = append(leases, d.cur)
	}
	m.overfull(leases, fmt.Sprintf("client %d was granted a permit (token %d) at t=%v while %d of %d permits were held: %s, each with Done open",
		c.id, h.token, m.at(), len(others), m.o.Permits, m.heldBy(others)))
}

// checkPermitBelievers is checkBelievers with Options.Permits > 1: at no
// moment may more than Permits clients hold leases valid by their own
// deadlines and Done.
func (m *machine) checkPermitBelievers() {
	bs := m.believers()
	if len(bs) <= m.o.Permits {
		return
	}
	leases := make([]*held, len(bs))
	ids := make([]string, len(bs))
	for i, c := range bs {
		leases[i], ids[i] = c.cur, fmt.Sprint(c.id)
	}
	m.overfull(leases, fmt.Sprintf("at t=%v clients %s held %d leases valid by their own deadlines, with Done open, for %d permits: %s",
		m.at(), strings.Join(ids, ", "), len(bs), m.o.Permits, m.heldBy(bs)))
}

// overfull reports more leases held at once than there are permits, once
// per lowest and highest owner among them.
func (m *machine) overfull(leases []*held, detail string) {
	lo, hi := leases[0].owner, leases[0].owner
	for _, h := range leases[1:] {
		lo, hi = min(lo, h.owner), max(hi, h.owner)
	}
	if m.firstReport([2]uint64{lo, hi}) {
		m.violate(Exclusivity, false, detail)
	}
}

// maxSpurious is how many refusals of a free lock one run tolerates.
const maxSpurious = 2

// refusal reports whether h[i] is an acquire refused, of known outcome.
func refusal(h []lockOp, i int) bool {
	return i >= 0 && i < len(h) && h[i].Input.Op == linearize.Acquire && !h[i].Output.OK && !h[i].Unknown
}

// without returns h without its operation i, the others numbered anew.
func without(h []lockOp, i int) []lockOp {
	out := make([]lockOp, 0, len(h)-1)
	for j, op := range h {
		if j != i {
			op.ID = len(out)
			out = append(out, op)
		}
	}
	return out
}
