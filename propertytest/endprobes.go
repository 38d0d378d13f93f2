package propertytest

import (
	"errors"
	"fmt"
	"math/rand/v2"
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

// deadlockFreedom: every client has crashed; once TTL + Slack +
// Backend.Recovery (liveBound) has passed, a new client's TryLock must be
// granted. A refused probe is retried as long again later, once (a
// refusal may be spurious), or up to three refusals in all after network
// faults: a request held by a healed partition may still land (in wall
// time) after the crash and take the lock for one more TTL. With Ongoing
// faults the nemesis strikes before each wait (strike), so the bound
// runs from a fault just injected.
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
	nemesis := m.nemesis()
	defer nemesis.stop()
	nemesis.strike() // first: a strike marks the run faulted, which allows a third refusal
	// One refusal may be spurious (see Progress): a second try decides.
	maxRefusals := 2
	if m.faults.faulted {
		maxRefusals = 3
	}
	var h *held
	var err error
	refused, unknown := 0, 0
	bound := m.liveBound()
	for refused < maxRefusals && unknown < maxUnknownProbes {
		if refused+unknown > 0 {
			nemesis.strike()
		}
		step := m.o.TTL / 4
		for passed := time.Duration(0); passed < bound; passed += step {
			m.advance(min(step, bound-passed))
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
			"every holder crashed at t=%v; at t=%v (%d × (TTL %v + slack %v + recovery %v) later%s; %d refused, %d without an answer) TryLock still failed: %v",
			round(time.Duration(crashed)), m.at(), refused+unknown, m.o.TTL, m.o.Slack, m.be.Recovery, nemesis.text(),
			refused, unknown, err))
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

// liveBound is how long after a lease's last grant or renewal its lock
// must be free again, its holder gone: TTL + Slack + Backend.Recovery.
func (m *machine) liveBound() time.Duration { return m.o.TTL + m.o.Slack + m.be.Recovery }

// nemesis is the backend's Ongoing faults going on after every client
// crashed, one struck at a time, drawn by a generator of the run's seed.
type nemesis struct {
	m       *machine
	faults  []int // indices into Backend.Faults of the Ongoing faults
	rnd     *rand.Rand
	active  int // the fault struck and not healed; -1 for none
	strikes int
}

// nemesis returns the run's end nemesis, which does nothing when the
// backend has no Ongoing fault.
func (m *machine) nemesis() *nemesis {
	n := &nemesis{m: m, active: -1, rnd: rand.New(rand.NewPCG(m.jitterSeed, nemesisStream))}
	for i, f := range m.be.Faults {
		if f.Ongoing {
			n.faults = append(n.faults, i)
		}
	}
	return n
}

// nemesisStream tells the nemesis's generator from the clients' jitter,
// which is seeded by the same number.
const nemesisStream = 0x6e656d65736973

// strike heals the fault struck last and injects one drawn anew, each
// written to the run's log as any fault is (toggleFault). A fault that
// cannot be toggled fails the run.
func (n *nemesis) strike() {
	if len(n.faults) == 0 || n.m.fatal != nil {
		return
	}
	n.stop()
	i := n.faults[n.rnd.IntN(len(n.faults))]
	if err := n.m.toggleFault(i); err != nil {
		n.m.fatal = err
		return
	}
	n.active = i
	n.strikes++
}

// stop heals the fault struck last, if any.
func (n *nemesis) stop() {
	if n.active < 0 {
		return
	}
	if err := n.m.toggleFault(n.active); err != nil && n.m.fatal == nil {
		n.m.fatal = err
	}
	n.active = -1
}

// text tells a violation how often the nemesis struck.
func (n *nemesis) text() string {
	if n.strikes == 0 {
		return ""
	}
	return fmt.Sprintf(", each after one of %d node faults the nemesis struck once the clients were gone", n.strikes)
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
	// TryLock. So a failed TryLock is retried after TTL + Slack + Recovery,
	// twice; a lock still refused then is unavailable.
	var h *held
	var err error
	for attempt := range availabilityTries {
		if attempt > 0 {
			m.logf("availability probe %d failed (%v): retrying after TTL + Slack + Recovery", attempt, err)
			m.advance(m.liveBound())
		}
		if h, err = m.tryLock(m.probe); h != nil {
			break
		}
	}
	if h == nil {
		fail(fmt.Sprintf("TryLock on the free lock (%d times, TTL + slack + recovery apart)", availabilityTries), err)
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
