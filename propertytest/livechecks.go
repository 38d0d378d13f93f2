package propertytest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// liveChecks are the checks the suite makes while a run goes on, at the
// moments the actions tell them of; a new property hooks in here without
// changing any action. A check may probe the lock through the machine.
type liveChecks interface {
	// granted: c takes the grant h, checked against the other holders.
	granted(c *client, h *held)
	// released: an Unlock or Renew by c of h returned err (rc: the call).
	released(c *client, h *held, rc releaseCall, o *op, err error)
	// unlocked: c's Unlock returned err and c let go of its lease.
	unlocked(c *client, err error)
	// renewed: c's Renew of h returned err.
	renewed(c *client, h *held, err error)
	// refusedFree: a TryLock of c (owner) was refused while the lock was
	// free by the suite's knowledge.
	refusedFree(c *client, owner uint64)
	// reentered: c's nested Lock or TryLock (name) on its acquisition h
	// returned nested, err.
	reentered(c *client, h *held, name string, nested locks.Lease, err error)
	// innerUnlocked: c unlocked a nested hold on h, which was valid before.
	innerUnlocked(c *client, h *held)
	// beforeForeign: a call on holder's lock by another is coming; false
	// when the lock was found not exclusive already.
	beforeForeign(holder *client) bool
	// afterForeign: a call by another (what) on holder's lock returned.
	afterForeign(what string, holder *client)
	// collected: the driver took in c's finished operation, if any.
	collected(c *client)
	// stepped: the driver took in every client after a step.
	stepped()
	// ended: every client crashed at the end of the run, which settled;
	// the checks may probe the lock (endprobes.go).
	ended()
}

// liveCheck is the suite's liveChecks: exclusivity at each grant and after
// each step, symmetry around foreign calls, progress and deadlock freedom
// around releases and refusals, the signalling of a lost lease.
type liveCheck struct {
	m      *machine
	pairs  map[[2]uint64]bool // owners reported holding at once
	lapsed []lapsed           // leases past their deadline, not yet signalled lost
}

var _ liveChecks = (*liveCheck)(nil)

// untouchedByFaults reports whether no backend fault can have touched the
// leases of hs: none is active, and none was injected or healed since the
// earliest of their acquisitions was called (a fault over before a lease
// was asked for cannot take it).
func (k *liveCheck) untouchedByFaults(hs []*client) bool {
	m := k.m
	if len(m.faults.active) > 0 {
		return false
	}
	for _, c := range hs {
		if c.cur.faultEvents != m.faults.events {
			return false
		}
	}
	return true
}

// heldBy describes the leases of hs for a violation's detail.
func (k *liveCheck) heldBy(hs []*client) string {
	m := k.m
	parts := make([]string, len(hs))
	for i, c := range hs {
		parts[i] = fmt.Sprintf("client %d's lease (token %d) was valid until t=%v", c.id, c.cur.token, m.since(c.cur.lease.Deadline()))
	}
	return strings.Join(parts, " and ")
}

// leasesOf returns the leases hs hold.
func leasesOf(hs []*client) []*held {
	out := make([]*held, len(hs))
	for i, c := range hs {
		out[i] = c.cur
	}
	return out
}

// ranOutDuring reports whether one of leases, held when a probe began, ran
// out by its deadline before the probe was granted h (time goes on during
// a probe in real time). Such a grant is the lease model's to judge, not
// the named check's (what); the probe's lease is given back.
func (k *liveCheck) ranOutDuring(what string, h *held, leases []*held) bool {
	m := k.m
	now := m.be.Clock.Now()
	for _, l := range leases {
		if !now.Before(l.lease.Deadline()) {
			m.logf("%s probe: granted (token %d) once a holder's lease (token %d) had run out during the probe", what, h.token, l.token)
			_ = m.unlock(m.probe, h) // recorded; its result is part of the history
			return true
		}
	}
	return false
}

// beforeForeign probes, before a foreign call, that the holder holds the
// lock. A granted probe is reported as exclusivity, and false is returned
// so the foreign call is not blamed too. Nothing is reported when a fault
// may have taken a lease (untouchedByFaults).
func (k *liveCheck) beforeForeign(holder *client) bool {
	m := k.m
	hs := m.fullHolders()
	if !k.untouchedByFaults(hs) || !slices.Contains(hs, holder) {
		return true
	}
	listed, leases := k.heldBy(hs), leasesOf(hs)
	h, err := m.tryLock(m.probe)
	if h == nil {
		if err != nil && !errors.Is(err, locks.ErrLocked) {
			m.logf("exclusivity probe: %v", err)
		}
		return true
	}
	if k.ranOutDuring("exclusivity", h, leases) {
		return false
	}
	m.violate(Exclusivity, false, fmt.Sprintf("a probe TryLock was granted (token %d) while %s", h.token, listed))
	_ = m.unlock(m.probe, h) // recorded; its result is part of the history
	return false
}

// afterForeign probes, after a foreign call, that a probe TryLock is
// refused while the holder's lease is within its local deadline; skipped
// when a fault may have touched a lease (untouchedByFaults).
func (k *liveCheck) afterForeign(what string, holder *client) {
	m := k.m
	hs := m.fullHolders()
	if !k.untouchedByFaults(hs) || !slices.Contains(hs, holder) {
		return
	}
	m.findings.ran[Symmetry] = true
	listed, leases := k.heldBy(hs), leasesOf(hs)
	h, err := m.tryLock(m.probe)
	if h == nil {
		if err != nil && !errors.Is(err, locks.ErrLocked) {
			m.logf("symmetry probe: %v", err)
		}
		return
	}
	if k.ranOutDuring("symmetry", h, leases) {
		return
	}
	m.violate(Symmetry, false, fmt.Sprintf("after %s, a probe TryLock was granted (token %d) while %s", what, h.token, listed))
	_ = m.unlock(m.probe, h) // recorded; its result is part of the history
}

// granted: when c is granted h, no other client may hold a lease valid by
// its own deadline and Done (with ReadWrite, unless both are shared). A
// correct holder's deadline ends no later than the backend's expiry, on
// one manual clock; a lock whose backend lease ends earlier than the
// holder believes fails here, whatever the lease model accepts.
func (k *liveCheck) granted(c *client, h *held) {
	m := k.m
	if !m.valid(h) {
		return // handed over already expired (it stalled on the way): c does not act as holder
	}
	if m.o.Permits > 1 {
		k.checkGrantOfPermit(c, h)
		return
	}
	for _, d := range m.cl {
		if d == c || !m.believes(d) || d.cur.shared && h.shared {
			continue
		}
		k.twoHolders(d.cur, h, fmt.Sprintf(
			"client %d was granted the lock (token %d) at t=%v while client %d's lease (token %d) was still valid by its own deadline, t=%v, and its Done was open",
			c.id, h.token, m.at(), d.id, d.cur.token, m.since(d.cur.lease.Deadline())))
	}
}

// stepped: after every step, no two clients may hold leases both valid by
// their own deadlines and Done; this catches a lease brought back to life
// by a late renewal that reported success.
func (k *liveCheck) stepped() {
	m := k.m
	if m.o.Permits > 1 {
		k.checkPermitBelievers()
		return
	}
	for i, c := range m.cl {
		if !m.believes(c) {
			continue
		}
		for _, d := range m.cl[i+1:] {
			if !m.believes(d) || c.cur.shared && d.cur.shared {
				continue
			}
			k.twoHolders(c.cur, d.cur, fmt.Sprintf(
				"at t=%v clients %d (token %d, valid until t=%v) and %d (token %d, valid until t=%v) both held leases valid by their own deadlines, with Done open",
				m.at(), c.id, c.cur.token, m.since(c.cur.lease.Deadline()),
				d.id, d.cur.token, m.since(d.cur.lease.Deadline())))
		}
	}
}

// twoHolders reports a and b holding at once, once per pair.
func (k *liveCheck) twoHolders(a, b *held, detail string) {
	m := k.m
	if k.firstReport([2]uint64{min(a.owner, b.owner), max(a.owner, b.owner)}) {
		m.violate(Exclusivity, false, detail)
	}
}

// firstReport reports whether the leases of the owners in key were not
// reported holding at once before, and marks them reported.
func (k *liveCheck) firstReport(key [2]uint64) bool {
	if k.pairs[key] {
		return false
	}
	if k.pairs == nil {
		k.pairs = map[[2]uint64]bool{}
	}
	k.pairs[key] = true
	return true
}

// unlocked: right after a successful Unlock, with nobody else holding or
// waiting and nothing in doubt, probeFree probes the lock. Skipped while a
// lease lapsed without an Unlock less than TTL + Slack + Recovery after
// its last grant or renewal may still hold it on the backend.
func (k *liveCheck) unlocked(c *client, err error) {
	m := k.m
	if err != nil || !m.lockFree(c) {
		return
	}
	k.probeFree(fmt.Sprintf("client %d unlocked at t=%v", c.id, m.at()))
}

// renewed: a refused Renew must leave Done closed and Err set, at once.
func (k *liveCheck) renewed(c *client, h *held, err error) {
	m := k.m
	if _, unknown := releaseOutcome(err); err == nil || unknown {
		return
	}
	m.findings.ran[Exclusivity] = true
	if !closed(h.lease.Done()) || h.lease.Err() == nil {
		m.violate(Exclusivity, false, fmt.Sprintf(
			"client %d's Renew was refused (%v) but its lease (token %d) did not say it was lost: Done open=%v, Err=%v",
			c.id, err, h.token, !closed(h.lease.Done()), h.lease.Err()))
	}
}

// collected: a lease past its deadline by more than Slack without a
// renewal must have Done closed and Err set; else a holder waiting on Done
// goes on as holder. A lapsed lease is judged only after one more settle,
// since a lock may close Done on a goroutine of its own.
func (k *liveCheck) collected(c *client) {
	m := k.m
	if c.cur != nil && !m.valid(c.cur) && !c.unlocking() && !closed(c.cur.lease.Done()) {
		k.lapsed = append(k.lapsed, lapsed{c: c, h: c.cur, settles: m.sched.settles})
	}
	kept := k.lapsed[:0]
	for _, l := range k.lapsed {
		if l.c != c || l.settles == m.sched.settles {
			kept = append(kept, l)
			continue
		}
		end := l.h.lease.Deadline().Add(m.o.Slack)
		switch {
		case closed(l.h.lease.Done()) && l.h.lease.Err() != nil:
		case m.be.Clock.Now().Before(end):
			kept = append(kept, l)
		default:
			m.findings.ran[Exclusivity] = true
			m.violate(Exclusivity, false, fmt.Sprintf(
				"client %d's lease (token %d) ended at t=%v, yet at t=%v (slack %v later) its Done was still open (Err=%v): the holder was never told it lost the lock",
				c.id, l.h.token, m.since(l.h.lease.Deadline()), m.at(), m.o.Slack, l.h.lease.Err()))
		}
	}
	k.lapsed = kept
}

// lapsed is a lease past its deadline whose Done has not closed yet.
type lapsed struct {
	c       *client
	h       *held
	settles int // sched.settles when it was first seen lapsed
}

// checkGrantOfPermit is granted with Options.Permits > 1: when c is
// granted h, fewer than Permits other clients may hold leases valid by
// their own deadlines.
func (k *liveCheck) checkGrantOfPermit(c *client, h *held) {
	m := k.m
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
	k.overfull(leases, fmt.Sprintf("client %d was granted a permit (token %d) at t=%v while %d of %d permits were held: %s, each with Done open",
		c.id, h.token, m.at(), len(others), m.o.Permits, k.heldBy(others)))
}

// checkPermitBelievers is stepped with Options.Permits > 1: at no
// moment may more than Permits clients hold leases valid by their own
// deadlines and Done.
func (k *liveCheck) checkPermitBelievers() {
	m := k.m
	bs := m.believers()
	if len(bs) <= m.o.Permits {
		return
	}
	leases := make([]*held, len(bs))
	ids := make([]string, len(bs))
	for i, c := range bs {
		leases[i], ids[i] = c.cur, fmt.Sprint(c.id)
	}
	k.overfull(leases, fmt.Sprintf("at t=%v clients %s held %d leases valid by their own deadlines, with Done open, for %d permits: %s",
		m.at(), strings.Join(ids, ", "), len(bs), m.o.Permits, k.heldBy(bs)))
}

// overfull reports more leases held at once than there are permits, once
// per lowest and highest owner among them.
func (k *liveCheck) overfull(leases []*held, detail string) {
	m := k.m
	lo, hi := leases[0].owner, leases[0].owner
	for _, h := range leases[1:] {
		lo, hi = min(lo, h.owner), max(hi, h.owner)
	}
	if k.firstReport([2]uint64{lo, hi}) {
		m.violate(Exclusivity, false, detail)
	}
}

// released: on a healthy run, a holder's Unlock or Renew called within its
// deadline, run straight through and returned before it, must not fail of
// itself (Outcomes.Failed); ErrNotHeld is the lock history's to judge. Not
// on a real-time backend, where requests time out under load.
func (k *liveCheck) released(c *client, h *held, rc releaseCall, o *op, err error) {
	m := k.m
	if m.sched.realTime || !rc.valid || !rc.straight || !m.healthy() || m.sched.wasHeldUp(o) || m.sched.crashed(o) ||
		!m.be.Clock.Now().Before(rc.deadline) {
		return
	}
	m.findings.ran[Progress] = true
	if err == nil || unknownError(err) || errors.Is(err, locks.ErrNotHeld) {
		return
	}
	m.violate(Progress, false, fmt.Sprintf(
		"client %d's %s of its lease (token %d, valid until t=%v) failed on a healthy backend, with nothing stalled: %v",
		c.id, rc.name, h.token, m.since(rc.deadline), err))
}

// refusedFree handles a spurious refusal of a free lock: counted and
// tolerated once, then probed as a freed lock is.
func (k *liveCheck) refusedFree(c *client, owner uint64) {
	m := k.m
	m.findings.countSpurious(owner)
	m.logf("client %d: TryLock refused while the lock was free (a spurious refusal)", c.id)
	k.probeFree(fmt.Sprintf("client %d's TryLock was refused at t=%v while the lock was free", c.id, m.at()))
}

// probeFree probes a lock that should be free (what says why and since
// when): a TryLock must be granted within Slack (tried every quarter of
// it), else it is probed every quarter TTL until TTL + 2 × Slack +
// Recovery later: granted then breaks Progress, never deadlock freedom.
func (k *liveCheck) probeFree(what string) {
	m := k.m
	m.findings.ran[DeadlockFreedom], m.findings.ran[Progress] = true, true
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
		until(m.liveBound()+m.o.Slack, max(m.o.TTL/4, time.Millisecond))
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
			"%s, with nobody else holding or waiting, and a TryLock was still refused %v later (TTL %v + 2 × slack %v + recovery %v): the lock was left taken",
			what, round(time.Duration(m.rec.now()-since)), m.o.TTL, m.o.Slack, m.be.Recovery))
	}
}

// reentered reports a refused re-entry (a holder must re-enter its own
// acquisition) and one that came back on another acquisition.
func (k *liveCheck) reentered(c *client, h *held, name string, nested locks.Lease, err error) {
	m := k.m
	switch {
	case err != nil:
		m.findings.ran[DeadlockFreedom] = true
		m.violate(DeadlockFreedom, false, fmt.Sprintf(
			"client %d holds the lock (token %d, valid until t=%v) and its owner's nested %s was refused: %v; an owner must re-enter its own acquisition",
			c.id, h.token, m.since(h.lease.Deadline()), name, err))
	case !sameAcquisition(h, nested):
		m.findings.ran[Exclusivity] = true
		tok, _ := nested.Token()
		m.violate(Exclusivity, false, fmt.Sprintf(
			"client %d holds the lock (token %d) and its owner's nested %s came back with another acquisition (token %d, deadline t=%v against t=%v): two acquisitions held at once",
			c.id, h.token, name, tok, m.since(nested.Deadline()), m.since(h.lease.Deadline())))
	}
}

// innerUnlocked reports an Unlock of a nested hold that ended the
// acquisition under the outer hold.
func (k *liveCheck) innerUnlocked(c *client, h *held) {
	m := k.m
	m.findings.ran[Exclusivity] = true
	if closed(h.lease.Done()) || h.lease.Err() != nil {
		m.violate(Exclusivity, false, fmt.Sprintf(
			"client %d's Unlock of a nested hold ended its acquisition (token %d; Err=%v) while its outer hold was still held: the lock is free to others under the owner's outer hold",
			c.id, h.token, h.lease.Err()))
	}
}
