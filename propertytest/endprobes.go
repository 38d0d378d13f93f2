package propertytest

import (
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// The live checks' probes of the lock at the end of a run, once every
// client crashed: deadlock freedom (the lock is obtainable again) and
// availability (with a minority of the nodes down). They drive the lock
// through the machine, as a seed replays, and read no history.

// ended probes the lock once every client crashed and the run settled.
func (k *liveCheck) ended() {
	k.deadlockFreedom()
	k.availability()
}

// deadlockFreedom: every client has crashed; once TTL + Slack has
// passed, a new client's TryLock must be granted. A refused probe is
// retried TTL + Slack later, once (a refusal may be spurious), or up to
// three refusals in all after network faults: a request held by a healed
// partition may still land (in wall time) after the crash and take the
// lock for one more TTL.
//
// A probe that ends without an answer (OpTimeout ran out on a loaded
// machine, say) is no evidence either way, and may even have taken the
// lock on the server; it is retried the same way, up to maxUnknownProbes
// times. Only a lock that refuses, or never answers, that often is
// reported.
func (k *liveCheck) deadlockFreedom() {
	m := k.m
	m.findings.ran[DeadlockFreedom] = true
	crashed := m.rec.now()
	// One refusal may be spurious (see Progress): a second try decides.
	maxRefusals := 2
	if m.faults.faulted {
		maxRefusals = 3
	}
	var h *held
	var err error
	refused, unknown := 0, 0
	for refused < maxRefusals && unknown < maxUnknownProbes {
		step := m.o.TTL / 4
		for passed := time.Duration(0); passed < m.o.TTL+m.o.Slack; passed += step {
			m.advance(min(step, m.o.TTL+m.o.Slack-passed))
		}
		if h, err = m.tryLock(m.probe); h != nil {
			break
		}
		if errors.Is(err, locks.ErrLocked) {
			refused++
		} else {
			unknown++
			m.logf("deadlock-freedom probe without an answer: %v", err)
		}
	}
	if h == nil {
		m.violate(DeadlockFreedom, false, fmt.Sprintf(
			"every holder crashed at t=%v; at t=%v (%d × (TTL %v + slack %v) later; %d refused, %d without an answer) TryLock still failed: %v",
			round(time.Duration(crashed)), m.at(), refused+unknown, m.o.TTL, m.o.Slack, refused, unknown, err))
		return
	}
	if refused > 0 && !m.faults.faulted {
		m.findings.spurious++
		m.logf("deadlock-freedom probe granted after %d refusals (spurious)", refused)
	}
	if err := m.unlock(m.probe, h); err != nil {
		m.logf("deadlock-freedom probe: unlock: %v", err)
	}
}

// maxUnknownProbes bounds the deadlock-freedom probes that may end without
// an answer before the lock is reported.
const maxUnknownProbes = 5

// availability stops a minority of the backend's nodes and requires
// TryLock, Renew and Unlock to succeed.
func (k *liveCheck) availability() {
	m := k.m
	if m.be.Nodes < 3 || m.be.StopNode == nil || m.be.StartNode == nil {
		return
	}
	m.findings.ran[Availability] = true
	down := (m.be.Nodes - 1) / 2
	for i := range down {
		m.be.StopNode(i)
	}
	defer func() {
		for i := range down {
			m.be.StartNode(i)
		}
	}()
	fail := func(what string, err error) {
		m.violate(Availability, false, fmt.Sprintf("with %d of %d nodes down (nodes 0..%d), %s failed: %v",
			down, m.be.Nodes, down-1, what, err))
	}
	// A request of the deadlock-freedom probe that timed out on a loaded
	// machine may still land on a node after its Unlock and hold the key
	// there for a TTL: with a minority down, that alone can refuse the next
	// TryLock. So a failed TryLock is retried after TTL + Slack, twice; a
	// lock still refused then is unavailable.
	var h *held
	var err error
	for attempt := range availabilityTries {
		if attempt > 0 {
			m.logf("availability probe %d failed (%v): retrying after TTL + Slack", attempt, err)
			m.advance(m.o.TTL + m.o.Slack)
		}
		if h, err = m.tryLock(m.probe); h != nil {
			break
		}
	}
	if h == nil {
		fail(fmt.Sprintf("TryLock on the free lock (%d times, TTL + slack apart)", availabilityTries), err)
		return
	}
	if err := m.renew(m.probe, h); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		fail("Renew", err) // a lock that cannot renew says so with errors.ErrUnsupported
	}
	if err := m.unlock(m.probe, h); err != nil {
		fail("Unlock", err)
	}
}

// availabilityTries is how many TryLocks the availability check makes on
// the free lock before it reports the lock unavailable.
const availabilityTries = 3
