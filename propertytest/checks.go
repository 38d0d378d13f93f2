package propertytest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lockproof/lockproof/linearize"
	"github.com/lockproof/lockproof/locks"
)

// Property names what a lock promises.
type Property string

// The properties the suite checks.
const (
	// Exclusivity: no second grant while the previous lease could not yet
	// have expired (the lock history is linearizable for
	// linearize.NewLeaseModel), fencing tokens grow from grant to grant,
	// and no update of the shared register is lost.
	Exclusivity Property = "exclusivity"
	// Symmetry: an Unlock or Renew by anyone but the holder never changes
	// the lock.
	Symmetry Property = "symmetry"
	// DeadlockFreedom: a lock whose holders are all gone (crashed, or
	// released) is obtainable again by TTL + Options.Slack, retried: it
	// is not refused for ever.
	DeadlockFreedom Property = "deadlock freedom"
	// Progress: a lock works when nothing is wrong. On a run with no
	// backend fault, and nothing in doubt (a crash, an unknown outcome, a
	// foreign call) within TTL + Options.Slack, a holder's Unlock and
	// Renew called within its deadline and run straight through do not
	// fail (on a backend in manual time), and a lock freed by an Unlock, or refused to a TryLock while
	// free, is granted again within Options.Slack, not only once it
	// expired. A single refusal of a free lock is tolerated and counted
	// (Report.SpuriousRefusals): a lock may lose a race inside its own
	// attempt.
	Progress Property = "progress"
	// Availability: with a minority of the backend's nodes down, TryLock,
	// Renew and Unlock still succeed.
	Availability Property = "availability"
)

// Violation is one property found broken in one run.
type Violation struct {
	// Property is the property broken.
	Property Property
	// Expected is true when the run injected faults the lock does not
	// claim to survive (Unclaimed), or paused a holder of a lock that does
	// not claim FaultPause: the lock was never meant to hold there.
	Expected bool
	// Unclaimed lists the unclaimed faults the run injected.
	Unclaimed []string
	// Detail says what happened.
	Detail string
	// History is the minimal failing history (for a linearizability
	// failure) or the end of the run's history, as text.
	History string
	// Evidence is the history the checks judged, with the checker's
	// result on it, as data.
	Evidence *Evidence
	// File is where Evidence was written as JSON (Options.OutDir), if it
	// was.
	File string
}

// Status is "VIOLATED" or "expected violation".
func (v Violation) Status() string {
	if v.Expected {
		return "expected violation"
	}
	return "VIOLATED"
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s: %s", v.Property, v.Status(), v.Detail)
	if len(v.Unclaimed) > 0 {
		fmt.Fprintf(&b, "\nunder unclaimed faults: %s", strings.Join(v.Unclaimed, ", "))
	}
	if v.History != "" {
		fmt.Fprintf(&b, "\nhistory:\n%s", v.History)
	}
	if v.File != "" && v.Evidence != nil {
		fmt.Fprintf(&b, "\nhistory file: %s (checked against the %s, which it names)", v.File, v.Evidence.Model)
	}
	return b.String()
}

// violate records a violation found by a named check.
func (m *machine) violate(p Property, expected bool, detail string) {
	lockH, _, _ := m.rec.histories()
	m.found = append(m.found, Violation{
		Property: p, Expected: expected || len(m.unclaimed) > 0, Unclaimed: m.unclaimedList(),
		Detail: detail, History: describeLockOps(m.lock, lockH, 24),
	})
}

func (m *machine) unclaimedList() []string {
	var out []string
	for k := range m.unclaimed {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// holder returns a client whose lease is valid (a client whose Unlock is
// under way no longer counts) when such clients hold every permit: with
// one permit, the holder, if any; with Options.Permits > 1, one of the
// holders of a full semaphore, else nil.
func (m *machine) holder() *client {
	if hs := m.fullHolders(); len(hs) > 0 {
		return hs[0]
	}
	return nil
}

// fullHolders returns the clients that believe they hold a lease when
// there are at least Options.Permits of them, else nil: the lock must then
// refuse a probe.
func (m *machine) fullHolders() []*client {
	var hs []*client
	for _, c := range m.cl {
		if m.believes(c) {
			hs = append(hs, c)
		}
	}
	if len(hs) < m.o.Permits {
		return nil
	}
	return hs
}

// finish ends the run: heals the faults, resolves pending Locks, then
// checks deadlock freedom and availability. The faults heal in the order
// of their index, not a map's, which Go draws anew at each range: two
// nodes of five down at the end of a Redlock run came back in either
// order, and two replays of a seed parted there.
func (m *machine) finish() error {
	for _, i := range slices.Sorted(maps.Keys(m.active)) {
		if err := m.toggleFault(i); err != nil {
			return err
		}
	}
	for _, c := range m.cl {
		m.crash(c)
	}
	if m.fatal != nil {
		return m.fatal
	}
	m.sched.settle()
	m.collect()
	m.checkDeadlockFreedom()
	m.checkAvailability()
	return nil
}

// checkDeadlockFreedom: every client has crashed; once TTL + Slack has
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
func (m *machine) checkDeadlockFreedom() {
	m.ran[DeadlockFreedom] = true
	crashed := m.rec.now()
	// One refusal may be spurious (see Progress): a second try decides.
	maxRefusals := 2
	if m.faulted {
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
	if refused > 0 && !m.faulted {
		m.spurious++
		m.logf("deadlock-freedom probe granted after %d refusals (spurious)", refused)
	}
	if err := m.unlock(m.probe, h); err != nil {
		m.logf("deadlock-freedom probe: unlock: %v", err)
	}
}

// maxUnknownProbes bounds the deadlock-freedom probes that may end without
// an answer before the lock is reported.
const maxUnknownProbes = 5

// checkAvailability stops a minority of the backend's nodes and requires
// TryLock, Renew and Unlock to succeed.
func (m *machine) checkAvailability() {
	if m.be.Nodes < 3 || m.be.StopNode == nil || m.be.StartNode == nil {
		return
	}
	m.ran[Availability] = true
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

// verdict runs the history checks after finish and returns every
// violation of the run, with its evidence, written by out, and the number
// of checks left undecided.
func (m *machine) verdict(ctx context.Context, out *outputs) ([]Violation, int, error) {
	lockH, regH, unfenced := m.rec.histories()
	m.ran[Exclusivity] = true
	in := historyInput{model: m.model, lock: m.lock, opts: m.o.checkOptions(), unclaimed: m.unclaimedList()}
	undecided := 0
	lf, err := checkLockHistory(ctx, in, lockH)
	if err != nil {
		return nil, 0, err
	}
	for _, op := range lf.refusals {
		m.logf("the lock history refused client %d's acquire at t=%v while the lock was free (a spurious refusal): judged without it",
			op.ClientID, round(time.Duration(op.Call)))
		m.countSpurious(op.Input.Owner)
	}
	if lf.illegal != nil {
		m.found = append(m.found, *lf.illegal) // after the named checks' findings, which came first in time
	}
	if lf.result.Verdict == linearize.Unknown {
		undecided++
	}
	if v, undec, err := checkRegister(ctx, in, regH, unfenced); err != nil {
		return nil, 0, err
	} else if v != nil {
		m.found = append(m.found, *v)
	} else if undec {
		undecided++
	}
	if detail, paused := checkLostUpdates(m.reg.lostUpdates(), m.o.claims(FaultPause)); detail != "" {
		if paused {
			m.unclaimed["a holder paused past its lease (pause)"] = true
		}
		m.violate(Exclusivity, paused, detail)
	}
	nth := map[Property]int{} // a property may be broken twice in a run: a file each
	for i := range m.found {
		v := &m.found[i]
		if v.Evidence == nil {
			// The whole lock history, for the named checks' findings.
			e := *lf.evidence
			e.Expected = v.Expected
			v.Evidence = &e
		}
		nth[v.Property]++
		v.File = out.write(v.Property, nth[v.Property], v.Evidence)
	}
	return m.found, undecided, nil
}

// believes reports whether c acts as the holder: its lease is valid by its
// deadline and Done, and it is not unlocking.
func (m *machine) believes(c *client) bool { return m.valid(c.cur) && !c.unlocking() }

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
