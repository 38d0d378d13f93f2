package propertytest

import (
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
