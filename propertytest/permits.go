package propertytest

import (
	"context"
	"fmt"
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
