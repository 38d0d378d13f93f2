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
func (m *machine) count(kind string, err error, acquire, crashed bool) {
	if m.outcomes == nil {
		m.outcomes = map[string]*Outcomes{}
	}
	o := m.outcomes[kind]
	if o == nil {
		o = &Outcomes{}
		m.outcomes[kind] = o
	}
	outcome(err, acquire, crashed)(o)
}

// healthy reports whether nothing that may have left the lock in doubt
// happened in the run: no backend fault, and no crash, unknown outcome or
// foreign call within TTL + Slack.
func (m *machine) healthy() bool {
	return !m.faulted && !(m.doubted && m.rec.now()-m.uncertain < int64(m.o.TTL+m.o.Slack))
}

// releaseCall is what checkReleaseWorks needs of an Unlock or Renew: the
// lease's state when it was called and how it ran.
type releaseCall struct {
	name     string
	deadline time.Time // the lease's deadline at the call
	valid    bool      // the lease was valid by its deadline and Err at the call
	straight bool      // called with no stall drawn
}

// checkReleaseWorks: on a healthy run, a holder's Unlock or Renew called
// within its lease's deadline, run straight through (no stall, not held
// up, not crashed) and returned before that deadline, must not fail of
// itself (Outcomes.Failed): a lock whose every release fails with an error
// is only ever freed by its TTL. A refusal (ErrNotHeld) is the lock
// history's to judge, a lease lost early. Not on a backend in real time,
// where a loaded machine makes requests time out of themselves.
func (m *machine) checkReleaseWorks(c *client, h *held, rc releaseCall, o *op, err error) {
	if m.sched.realTime || !rc.valid || !rc.straight || !m.healthy() || m.sched.wasHeldUp(o) || m.sched.crashed(o) ||
		!m.be.Clock.Now().Before(rc.deadline) {
		return
	}
	m.ran[Progress] = true
	if err == nil || unknownError(err) || errors.Is(err, locks.ErrNotHeld) {
		return
	}
	m.violate(Progress, false, fmt.Sprintf(
		"client %d's %s of its lease (token %d, valid until t=%v) failed on a healthy backend, with nothing stalled: %v",
		c.id, rc.name, h.token, m.since(rc.deadline), err))
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
			if m.rec.now()-h.proved < int64(m.o.TTL+m.o.Slack) {
				return false
			}
		}
	}
	return true
}

// countSpurious counts the refusal of a free lock to the acquisition of
// owner, once whether the suite or the lock history saw it.
func (m *machine) countSpurious(owner uint64) {
	if m.spuriousOwners[owner] {
		return
	}
	if m.spuriousOwners == nil {
		m.spuriousOwners = map[uint64]bool{}
	}
	m.spuriousOwners[owner] = true
	m.spurious++
}

// refusedWhileFree handles a TryLock of c refused while the lock was free
// by the suite's knowledge: a spurious refusal, counted and tolerated once
// (a lock may lose a race inside its own attempt), then probed as a freed
// lock is.
func (m *machine) refusedWhileFree(c *client, owner uint64) {
	m.countSpurious(owner)
	m.logf("client %d: TryLock refused while the lock was free (a spurious refusal)", c.id)
	m.probeFree(fmt.Sprintf("client %d's TryLock was refused at t=%v while the lock was free", c.id, m.at()))
}

// probeFree probes a lock that should be free (what says why, and since
// when): a probe TryLock must be granted, at once or within Options.Slack
// (tried at once, then after every quarter of Slack). A lock still
// refused then is probed on, every quarter of the TTL, until TTL + Slack
// later: granted by then, it broke Progress (it came free only by expiry:
// something was left behind, a key kept alive, a queue entry); never
// granted, it broke deadlock freedom.
func (m *machine) probeFree(what string) {
	m.ran[DeadlockFreedom], m.ran[Progress] = true, true
	since := m.rec.now()
	var h *held
	var err error
	answered := func() bool {
		h, err = m.tryLock(m.probe)
		return h != nil || !errors.Is(err, locks.ErrLocked)
	}
	// until probes every step until an answer, or until waited reaches
	// limit.
	waited := time.Duration(0)
	until := func(limit, step time.Duration) bool {
		for waited < limit {
			m.advance(step)
			waited += step
			if answered() {
				return true
			}
		}
		return false
	}
	if !answered() && !until(m.o.Slack, max(m.o.Slack/4, time.Millisecond)) {
		until(m.o.TTL+2*m.o.Slack, max(m.o.TTL/4, time.Millisecond))
	}
	if !errors.Is(err, locks.ErrLocked) && h == nil {
		m.logf("freed-lock probe without an answer: %v", err)
		return
	}
	if h != nil {
		if uerr := m.unlock(m.probe, h); uerr != nil {
			m.logf("freed-lock probe: unlock: %v", uerr)
		}
	}
	switch {
	case h != nil && waited <= m.o.Slack:
		return
	case h != nil:
		m.violate(Progress, false, fmt.Sprintf(
			"%s, with nobody else holding or waiting, and a TryLock was refused until %v later (slack %v): the lock was left taken until it expired",
			what, round(time.Duration(m.rec.now()-since)), m.o.Slack))
	default:
		m.violate(DeadlockFreedom, false, fmt.Sprintf(
			"%s, with nobody else holding or waiting, and a TryLock was still refused %v later (TTL %v + 2 × slack %v): the lock was left taken",
			what, round(time.Duration(m.rec.now()-since)), m.o.TTL, m.o.Slack))
	}
}
