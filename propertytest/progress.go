package propertytest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// The suite's checks that a lock works when nothing is wrong (Progress),
// the refusals it tolerates once (spurious refusals), and the count of
// every call's outcome.

// Outcomes counts how the calls of one kind ended.
type Outcomes struct {
	// OK counts the grants, releases and renewals.
	OK int
	// Refused counts the lock's own "no": locks.ErrLocked for an
	// acquisition, locks.ErrNotHeld for an Unlock or Renew.
	Refused int
	// Failed counts every other error a call returned of itself: a script
	// error, a broken protocol, a lock that cannot renew.
	Failed int
	// Unknown counts the calls the suite cut short or the lock answered
	// without asking its backend: a crash, a cancelled context or an
	// operation's timeout, a lease already past its deadline or released.
	Unknown int
}

// Total is the number of calls counted.
func (o Outcomes) Total() int { return o.OK + o.Refused + o.Failed + o.Unknown }

func (o Outcomes) String() string {
	return fmt.Sprintf("%d ok, %d refused, %d failed, %d unknown", o.OK, o.Refused, o.Failed, o.Unknown)
}

// outcomeKinds are the kinds of call Report.Outcomes counts, in the order
// a report lists them.
var outcomeKinds = []string{"Lock", "TryLock", "Unlock", "Renew"}

// outcome classifies what a call of an acquisition (acquire) or a release
// or renewal returned; crashed marks a call the suite's crash ended.
func outcome(err error, acquire, crashed bool) func(*Outcomes) {
	switch {
	case err == nil:
		return func(o *Outcomes) { o.OK++ }
	case crashed || unknownError(err):
		return func(o *Outcomes) { o.Unknown++ }
	case acquire && errors.Is(err, locks.ErrLocked), !acquire && errors.Is(err, locks.ErrNotHeld):
		return func(o *Outcomes) { o.Refused++ }
	}
	return func(o *Outcomes) { o.Failed++ }
}

// unknownError reports whether err ends a call for a reason the suite or
// the lease's own deadline gave, not the lock: a cancelled or timed-out
// context, a lease expired or released before the call, an operation the
// lock does not support.
func unknownError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, locks.ErrLeaseExpired) || errors.Is(err, locks.ErrReleased) ||
		errors.Is(err, errors.ErrUnsupported)
}

// count adds a call of kind to the run's outcomes.
func (f *findings) count(kind string, err error, acquire, crashed bool) {
	if f.outcomes == nil {
		f.outcomes = map[string]*Outcomes{}
	}
	o := f.outcomes[kind]
	if o == nil {
		o = &Outcomes{}
		f.outcomes[kind] = o
	}
	outcome(err, acquire, crashed)(o)
}

// healthy reports whether nothing that may have left the lock in doubt
// happened in the run: no backend fault, and no crash, unknown outcome or
// foreign call within TTL + Slack + Recovery (liveBound).
func (m *machine) healthy() bool {
	return !m.faults.faulted && !(m.doubted && m.rec.now()-m.uncertain < int64(m.liveBound()))
}

// releaseCall is what checkReleaseWorks needs of an Unlock or Renew: the
// lease's state when it was called and how it ran.
type releaseCall struct {
	name     string
	deadline time.Time // the lease's deadline at the call
	valid    bool      // the lease was valid by its deadline and Err at the call
	straight bool      // called with no stall drawn
}

// lockFree reports whether the lock is free as far as the suite can know,
// c's own operation aside: no client holds or waits, no lease that lapsed
// without an Unlock may still be live on the backend, and the run is
// healthy.
func (m *machine) lockFree(c *client) bool {
	if !m.healthy() {
		return false
	}
	for _, d := range append(m.cl, m.probe) {
		if d.op != nil || (d != c && d.cur != nil) {
			return false
		}
		for _, h := range d.stale {
			// A lease its holder let lapse without an Unlock may still be
			// live on the backend: until TTL after its grant or renewal
			// reached it, which may be well after the deadline the holder
			// reckoned from the call (a grant in a second request, late).
			if m.rec.now()-h.proved < int64(m.liveBound()) {
				return false
			}
		}
	}
	return true
}

// countSpurious counts the refusal of a free lock to the acquisition of
// owner, once whether the suite or the lock history saw it.
func (f *findings) countSpurious(owner uint64) {
	if f.spuriousOwners[owner] {
		return
	}
	if f.spuriousOwners == nil {
		f.spuriousOwners = map[uint64]bool{}
	}
	f.spuriousOwners[owner] = true
	f.spurious++
}
