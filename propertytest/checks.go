package propertytest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockproof/lockproof/linearize"
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
	// Progress: a lock works when nothing is wrong: with no fault and
	// nothing in doubt within TTL + Options.Slack, a holder's Unlock and
	// Renew within its deadline do not fail, and a freed lock is granted
	// within Options.Slack (one spurious refusal tolerated and counted).
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
	m.findings.found = append(m.findings.found, Violation{
		Property: p, Expected: expected || len(m.faults.unclaimed) > 0, Unclaimed: m.faults.unclaimedList(),
		Detail: detail, History: describeLockOps(m.lock, lockH, 24),
	})
}

// holder returns a client with a valid lease (not unlocking) when such
// clients hold every permit, else nil.
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

// verdict runs the history checks after finish and returns every
// violation of the run, with its evidence, written by out, and the number
// of checks left undecided.
func (m *machine) verdict(ctx context.Context, out *outputs) ([]Violation, int, error) {
	lockH, regH, unfenced := m.rec.histories()
	m.findings.ran[Exclusivity] = true
	in := historyInput{model: m.model, lock: m.lock, opts: m.o.checkOptions(), unclaimed: m.faults.unclaimedList()}
	undecided := 0
	lf, err := checkLockHistory(ctx, in, lockH)
	if err != nil {
		return nil, 0, err
	}
	for _, op := range lf.refusals {
		m.logf("the lock history refused client %d's acquire at t=%v while the lock was free (a spurious refusal): judged without it",
			op.ClientID, round(time.Duration(op.Call)))
		m.findings.countSpurious(op.Input.Owner)
	}
	if lf.illegal != nil {
		m.findings.found = append(m.findings.found, *lf.illegal) // after the named checks' findings, which came first in time
	}
	if lf.result.Verdict == linearize.Unknown {
		undecided++
	}
	if v, undec, err := checkRegister(ctx, in, regH, unfenced); err != nil {
		return nil, 0, err
	} else if v != nil {
		m.findings.found = append(m.findings.found, *v)
	} else if undec {
		undecided++
	}
	if detail, paused := checkLostUpdates(m.reg.lostUpdates(), m.o.claims(FaultPause)); detail != "" {
		if paused {
			m.faults.unclaimed["a holder paused past its lease (pause)"] = true
		}
		m.violate(Exclusivity, paused, detail)
	}
	nth := map[Property]int{} // a property may be broken twice in a run: a file each
	for i := range m.findings.found {
		v := &m.findings.found[i]
		if v.Evidence == nil {
			// The whole lock history, for the named checks' findings.
			e := *lf.evidence
			e.Expected = v.Expected
			v.Evidence = &e
		}
		nth[v.Property]++
		v.File = out.write(v.Property, nth[v.Property], v.Evidence)
	}
	return m.findings.found, undecided, nil
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
