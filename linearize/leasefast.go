package linearize

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sort"
)

// The lease model's own decision procedure (leaseDecider.decide), which
// Check uses for a model from NewLeaseModel:
//
//  1. Violations visible without search, per lock: a grant with token 0;
//     a successful release or renewal for an owner no acquire names; a
//     grant whose token is not above that of a grant that returned before
//     it was called; a grant called after another grant returned and
//     returning before that grant's lease could expire, with no release
//     for the first owner called in between. Each is a proof for the whole
//     history; the one or two operations involved are the counterexample
//     (confirmed by a search of that sub-history, which also names its
//     Blocker).
//  2. Otherwise the generic search, run on the subset construction of the
//     lease model: a state is the set of lease states the operations so
//     far may have led to, and an unknown operation steps to the union of
//     its effect and its absence, so it never splits the search in two
//     (the split is what made the search exponential on histories with
//     many unknown acquires: every combination of them that took effect
//     gives different holders, tokens and expiries). An unknown operation
//     can still be placed later, where its effect differs; it is placed
//     only where it changes the set, unknown acquires of the anonymous
//     holder in call order only (leaseRun.pooled), and unknown operations
//     that can never take effect again are settled (leaseRun.retired).
//  3. An Ok witness is a path through the sets, picked backwards, and is
//     replayed on the lease model before it is returned: should it fail,
//     the history goes to the generic search of the lease model itself.

// leaseSet is a non-empty set of lease states: one is its least member (in
// leaseCmp order), more the others in order, leaseStateBytes each. Most
// sets have one member, which then costs no allocation.
type leaseSet struct {
	one  LeaseState
	more string
}

const leaseStateBytes = 33

func leaseCmp(a, b LeaseState) int {
	if a.Held != b.Held {
		if a.Held {
			return 1
		}
		return -1
	}
	return cmp.Or(cmp.Compare(a.Holder, b.Holder), cmp.Compare(a.Token, b.Token),
		cmp.Compare(a.Expiry, b.Expiry), cmp.Compare(a.Floor, b.Floor))
}

func appendLeaseState(b []byte, s LeaseState) []byte {
	held := byte(0)
	if s.Held {
		held = 1
	}
	b = append(b, held)
	b = binary.LittleEndian.AppendUint64(b, s.Holder)
	b = binary.LittleEndian.AppendUint64(b, s.Token)
	b = binary.LittleEndian.AppendUint64(b, uint64(s.Expiry))
	return binary.LittleEndian.AppendUint64(b, uint64(s.Floor))
}

func readLeaseState(b string) LeaseState {
	u := func(i int) uint64 {
		var x uint64
		for j := 7; j >= 0; j-- {
			x = x<<8 | uint64(b[i+j])
		}
		return x
	}
	return LeaseState{Held: b[0] == 1, Holder: u(1), Token: u(9), Expiry: int64(u(17)), Floor: int64(u(25))}
}

// members appends the states of set to dst.
func (set leaseSet) members(dst []LeaseState) []LeaseState {
	dst = append(dst, set.one)
	for i := 0; i < len(set.more); i += leaseStateBytes {
		dst = append(dst, readLeaseState(set.more[i:i+leaseStateBytes]))
	}
	return dst
}

// makeLeaseSet returns the set of the states in ss (sorted and
// deduplicated in place); ss must not be empty.
func makeLeaseSet(ss []LeaseState, scratch []byte) (leaseSet, []byte) {
	slices.SortFunc(ss, leaseCmp)
	ss = slices.CompactFunc(ss, func(a, b LeaseState) bool { return a == b })
	ss = undominated(ss)
	set := leaseSet{one: ss[0]}
	if len(ss) > 1 {
		scratch = scratch[:0]
		for _, s := range ss[1:] {
			scratch = appendLeaseState(scratch, s)
		}
		set.more = string(scratch)
	}
	return set, scratch
}

// dominates reports whether every sequence of operations the lease model
// accepts from b it also accepts from a, reaching states that again
// dominate: the same holder (or both free), and a token, expiry and floor
// no higher (a free lock's expiry is never read). Each of them only ever
// forbids: a higher token refuses more grants, a later expiry more
// grants and failed releases, a higher floor more operations.
func dominates(a, b LeaseState) bool {
	return a.Held == b.Held && a.Holder == b.Holder && a.Token <= b.Token && a.Floor <= b.Floor &&
		(!a.Held || a.Expiry <= b.Expiry)
}

// undominated returns the states of ss (sorted by leaseCmp, distinct)
// that no other one dominates, in order; of states that dominate each
// other (free locks that differ in expiry) the first. A set without the
// others accepts exactly what the set with them does.
func undominated(ss []LeaseState) []LeaseState {
	var arr [8]LeaseState
	out := arr[:0]
	for i, b := range ss {
		dominated := false
		// Only states of the same holder can dominate b: they are
		// adjacent in leaseCmp order.
		for j := i - 1; j >= 0 && ss[j].Held == b.Held && ss[j].Holder == b.Holder && !dominated; j-- {
			dominated = dominates(ss[j], b)
		}
		for j := i + 1; j < len(ss) && ss[j].Held == b.Held && ss[j].Holder == b.Holder && !dominated; j++ {
			dominated = dominates(ss[j], b) && !dominates(b, ss[j])
		}
		if !dominated {
			out = append(out, b)
		}
	}
	return append(ss[:0], out...)
}

func leaseStateHash(s LeaseState) uint64 {
	h := s.Holder*0x9e3779b97f4a7c15 ^ s.Token*0xc2b2ae3d27d4eb4f ^
		uint64(s.Expiry)*0x165667b19e3779f9 ^ uint64(s.Floor)*0x27d4eb2f165667c5
	if s.Held {
		h = ^h
	}
	return h
}

// leaseDecider is the fast decider of one lease model (see above).
type leaseDecider struct {
	life  int64 // ttl - tolerance
	model Model[LeaseState, LeaseInput, LeaseOutput]
	seed  maphash.Seed
	// plainCap is the stepCap of the search of the lease model itself,
	// tried first; 0 skips it (tests of the search on sets).
	plainCap int
}

func newLeaseDecider(life int64, model Model[LeaseState, LeaseInput, LeaseOutput]) *leaseDecider {
	return &leaseDecider{life: life, model: model, seed: maphash.MakeSeed(), plainCap: 4}
}

// leaseRun is the decider set up for one history: the set model, and the
// owners the history's releases and renewals name. A lock held by any
// other owner is held by anon in the sets: the model reads the holder
// only to compare it with the owner of a release or renewal, so owners no
// release or renewal names are interchangeable, and merging them lets
// dominance compare their states.
type leaseRun struct {
	*leaseDecider
	named map[uint64]bool
	anon  uint64
	sets  filled[leaseSet, LeaseInput, LeaseOutput]
	// granted is the highest token a known grant gave each owner;
	// unsure, the owners of unknown acquires (see retired).
	granted map[uint64]uint64
	unsure  map[uint64]bool
}

func (d *leaseDecider) run(h []Operation[LeaseInput, LeaseOutput]) *leaseRun {
	r := &leaseRun{leaseDecider: d, named: map[uint64]bool{}, granted: map[uint64]uint64{}, unsure: map[uint64]bool{}}
	for i := range h {
		op := &h[i]
		switch {
		case op.Input.Op != Acquire:
			r.named[op.Input.Owner] = true
		case op.Unknown:
			r.unsure[op.Input.Owner] = true
		case op.Output.OK:
			r.granted[op.Input.Owner] = max(r.granted[op.Input.Owner], op.Output.Token)
		}
	}
	r.anon = math.MaxUint64
	for r.named[r.anon] {
		r.anon--
	}
	r.sets = filled[leaseSet, LeaseInput, LeaseOutput]{Model: Model[leaseSet, LeaseInput, LeaseOutput]{
		Init:  func() leaseSet { return leaseSet{one: LeaseState{}} },
		Step:  r.setStep,
		Equal: func(a, b leaseSet) bool { return a == b },
		Hash: func(s leaseSet) uint64 {
			h := leaseStateHash(s.one)
			if s.more != "" {
				h ^= maphash.String(d.seed, s.more)
			}
			return h
		},
		Partition: func(in LeaseInput) string { return in.Lock },
		// A refused acquire keeps the held states of a set: on sets it is
		// a filter, not read-only. The search takes a read-only operation
		// greedily only when its step leaves the state as it is, and for
		// a filter that is as safe: a linearization that takes it later,
		// from a set T, goes on from its subset; skipping it there goes on
		// from T itself, which accepts at least as much.
		ReadOnly: func(op *Operation[LeaseInput, LeaseOutput]) bool {
			return op.Input.Op == Acquire && !op.Output.OK && !op.Unknown
		},
		DescribeOperation: describeLease,
		DescribeState: func(s leaseSet) string {
			return fmt.Sprintf("one of %d lease states", 1+len(s.more)/leaseStateBytes)
		},
		superset: true,
	}}
	r.sets.pooled, r.sets.retired = r.pooled, r.retired
	return r
}

// pooled reports whether op is an unknown acquire whose owner no release
// or renewal names: in the sets its holder is anon, so that such acquires
// differ only in their call. The one called first is at least as good
// anywhere: from the same state it grants the same token to the same
// holder, with an expiry no later. (After the two grants, the later one
// reads an expiry at or before the floor the earlier one's path had to
// pass to grant again: the lock it held, anon's, can only expire.)
func (r *leaseRun) pooled(op *Operation[LeaseInput, LeaseOutput]) bool {
	return op.Input.Op == Acquire && op.Unknown && !r.named[op.Input.Owner]
}

// retired reports whether the unknown op can take no effect from any
// state the set may lead to: an unknown renewal never does (the model
// ignores it), and an unknown release by o does not once no member is
// held by o and o can never be granted again: no unknown acquire names
// o, and every member's token is at least that of o's last known grant
// (which needs a higher one).
func (r *leaseRun) retired(set leaseSet, op *Operation[LeaseInput, LeaseOutput]) bool {
	switch op.Input.Op {
	case Renew:
		return true
	case Release:
		o := op.Input.Owner
		if r.unsure[o] {
			return false
		}
		var arr [4]LeaseState
		for _, s := range set.members(arr[:0]) {
			if s.Held && s.Holder == o || s.Token < r.granted[o] {
				return false
			}
		}
		return true
	}
	return false
}

// norm replaces, in the states op led to, a holder no release or renewal
// names by anon, when op is an unknown acquire (the holders that make
// sets grow; a known grant's token tells its states apart anyway, and
// looking every owner up costs a fifth of an easy check). Only an acquire
// makes its owner the holder.
func (r *leaseRun) norm(ss []LeaseState, op *Operation[LeaseInput, LeaseOutput]) {
	if o := op.Input.Owner; op.Input.Op == Acquire && op.Unknown && !r.named[o] {
		for i := range ss {
			if ss[i].Held && ss[i].Holder == o {
				ss[i].Holder = r.anon
			}
		}
	}
}

// setStep is the lease model's Step lifted to sets: the union of the
// members' next states, and for an unknown operation the set itself too.
// It keeps its scratch space on the stack (the searchers of the workers
// call it concurrently).
func (r *leaseRun) setStep(dst []leaseSet, set leaseSet, op *Operation[LeaseInput, LeaseOutput]) []leaseSet {
	var arr [4]LeaseState
	var in [4]LeaseState
	var next []LeaseState
	if set.more == "" {
		next = leaseStep(arr[:0], set.one, op, r.life, false)
		if op.Unknown {
			next = append(next, set.one)
		}
	} else {
		members := set.members(in[:0])
		next = arr[:0]
		for _, s := range members {
			next = leaseStep(next, s, op, r.life, false)
		}
		if op.Unknown {
			next = append(next, members...)
		}
	}
	if len(next) == 0 {
		return dst
	}
	r.norm(next, op)
	if len(next) == 1 {
		return append(dst, leaseSet{one: next[0]})
	}
	var buf [4 * leaseStateBytes]byte
	s, _ := makeLeaseSet(next, buf[:0])
	return append(dst, s)
}

// decide is the Model.fast of the lease model.
func (d *leaseDecider) decide(parent, ctx context.Context, h []Operation[LeaseInput, LeaseOutput], opts Options, b *budget) (Result, bool) {
	r := d.run(h)
	parts := partition(&r.sets, h)
	for pi := range parts {
		cand := d.evident(h, parts[pi].Ops)
		if cand == nil {
			continue
		}
		// Confirm on the sub-history, which also names the blocker.
		sr := getSearcher(&r.sets, h, b, nil)
		sr.reset(cand)
		out := sr.run()
		putSearcher(sr)
		if out.verdict != Illegal {
			continue // not a proof after all: leave it to the search
		}
		res := Result{Verdict: Illegal, Partitions: parts, FailingPartition: pi, Blocker: out.blocker}
		for i := range parts {
			parts[i].Verdict = Unknown
		}
		parts[pi].Verdict, parts[pi].blocker = Illegal, out.blocker
		if opts.NoMinimize {
			res.Counterexample = cand
		} else {
			res.Counterexample, res.Minimal, res.ShrinkElapsed = shrinkWithin(parent, &r.sets, h, cand, out.blocker, opts)
		}
		return res, true
	}

	// The search of the lease model itself is the quickest on most
	// partitions: it gets a few steps per operation, and the partitions
	// it does not decide in them go to the search on sets.
	plain := filled[LeaseState, LeaseInput, LeaseOutput]{Model: d.model, stepCap: d.plainCap}
	plain.fast = nil
	var res Result
	if d.plainCap > 0 {
		res = decide(ctx, &plain, h, parts, opts, b)
	} else {
		res = Result{Verdict: Unknown, Partitions: parts}
		for i := range parts {
			parts[i].Verdict = Unknown
		}
	}
	plainIllegal := res.Verdict == Illegal
	if res.Verdict == Unknown && !b.out() {
		var rest []Partition
		var at []int
		for i := range res.Partitions {
			if p := &res.Partitions[i]; p.Verdict == Unknown {
				rest, at = append(rest, Partition{Key: p.Key, Ops: p.Ops}), append(at, i)
			}
		}
		sub := decide(ctx, &r.sets, h, rest, opts, b)
		for j, i := range at {
			p := &sub.Partitions[j]
			if p.Verdict == Ok {
				w, ok := r.witness(h, p.Linearization, p.trail)
				if !ok || !allKnown(h, p.Ops, w) {
					return Result{}, false
				}
				p.Linearization = w
			}
			p.trail = nil
			res.Partitions[i] = *p
		}
		verdictOf(ctx, &res, b)
	}
	if res.Verdict == Illegal {
		// Shrinking keeps the blocker of the search that found it, so it
		// runs that search: the plain one capped (a trial it does not
		// decide leaves the counterexample unminimized), or the one on sets.
		if plainIllegal {
			plain.stepCap = 64
			res.Counterexample, res.Minimal, res.ShrinkElapsed = shrinkWithin(parent, &plain, h,
				res.Partitions[res.FailingPartition].Ops, res.Blocker, opts)
		} else {
			res.Counterexample, res.Minimal, res.ShrinkElapsed = shrinkWithin(parent, &r.sets, h,
				res.Partitions[res.FailingPartition].Ops, res.Blocker, opts)
		}
	}
	return res, true
}

// witness turns a linearization found on the sets into one of the lease
// model: it picks a path through the sets backwards, leaving out the
// unknown operations the path does not need, then replays the path on the
// lease model. It reports false if that replay fails.
func (r *leaseRun) witness(h []Operation[LeaseInput, LeaseOutput], lin []int, trail any) ([]int, bool) {
	after, _ := trail.([]leaseSet)
	if len(after) != len(lin) {
		return nil, false
	}
	sets := append([]leaseSet{r.sets.Init()}, after...)
	var members, next []LeaseState
	cur := sets[len(lin)].one
	keep := make([]bool, len(lin))
	for i := len(lin) - 1; i >= 0; i-- {
		op := &h[lin[i]]
		if sets[i].more == "" {
			// One state before: the path must come from it; whether op
			// took effect, replay checks.
			keep[i] = !op.Unknown || sets[i].one != cur
			cur = sets[i].one
			continue
		}
		members = sets[i].members(members[:0])
		if op.Unknown && slices.Contains(members, cur) {
			continue // never took effect
		}
		found := false
		for _, p := range members {
			next = leaseStep(next[:0], p, op, r.life, false)
			r.norm(next, op)
			if slices.Contains(next, cur) {
				cur, found, keep[i] = p, true, true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	w := kept(lin, keep)
	return w, r.replay(h, w)
}

// replay reports whether w is a linearization of the lease model: each
// operation accepted from some state the ones before it may have led to,
// and no operation placed after one that returned before it was called.
func (d *leaseDecider) replay(h []Operation[LeaseInput, LeaseOutput], w []int) bool {
	states := []LeaseState{d.model.Init()}
	var next []LeaseState
	latestCall := int64(-1 << 63)
	for _, x := range w {
		op := &h[x]
		if !op.Unknown && op.Return < latestCall {
			return false // placed after an operation called after it returned
		}
		latestCall = max(latestCall, op.Call)
		next = next[:0]
		for _, s := range states {
			next = d.model.Step(next, s, op)
		}
		if len(next) == 0 {
			return false
		}
		slices.SortFunc(next, leaseCmp)
		states = append(states[:0], slices.CompactFunc(next, func(a, b LeaseState) bool { return a == b })...)
	}
	return true
}

// evident returns the operations of a violation visible without search in
// the partition ops (history indices by call), or nil (see the top of the
// file).
func (d *leaseDecider) evident(h []Operation[LeaseInput, LeaseOutput], ops []int) []int {
	granted := func(i int) bool {
		op := &h[i]
		return op.Input.Op == Acquire && !op.Unknown && op.Output.OK
	}
	named := map[uint64]bool{} // owners an acquire may have granted to
	relCall := map[uint64]int64{}
	var grants []int
	for _, i := range ops {
		op := &h[i]
		switch {
		case op.Input.Op == Acquire && (op.Unknown || op.Output.OK):
			named[op.Input.Owner] = true
		case op.Input.Op == Release && (op.Unknown || op.Output.OK):
			if c, ok := relCall[op.Input.Owner]; !ok || op.Call < c {
				relCall[op.Input.Owner] = op.Call
			}
		}
		if granted(i) {
			if op.Output.Token == 0 {
				return []int{i}
			}
			grants = append(grants, i)
		}
	}
	for _, i := range ops {
		op := &h[i]
		if op.Input.Op != Acquire && !op.Unknown && op.Output.OK && !named[op.Input.Owner] {
			return []int{i}
		}
	}
	if len(grants) < 2 {
		return nil
	}
	// grants are by call. byRet: the same by return.
	byRet := slices.Clone(grants)
	slices.SortFunc(byRet, func(a, b int) int { return cmp.Compare(h[a].Return, h[b].Return) })
	// Token regression: sweep the grants by call, with the highest token
	// among the grants that returned before the call.
	best, r := -1, 0
	for _, g := range grants {
		for r < len(byRet) && h[byRet[r]].Return < h[g].Call {
			if best < 0 || h[byRet[r]].Output.Token > h[best].Output.Token {
				best = byRet[r]
			}
			r++
		}
		if best >= 0 && h[g].Output.Token <= h[best].Output.Token {
			return []int{best, g} // best returned before g was called
		}
	}
	// Double grant: for each first grant g1, the grant called after g1
	// returned that returns first; it is a violation if it returns before
	// g1's lease can expire and before any release for g1's owner is
	// called.
	sufMin := make([]int, len(grants)+1) // index into grants of the least return from j on
	sufMin[len(grants)] = -1
	for j := len(grants) - 1; j >= 0; j-- {
		sufMin[j] = j
		if k := sufMin[j+1]; k >= 0 && h[grants[k]].Return < h[grants[j]].Return {
			sufMin[j] = k
		}
	}
	for _, g1 := range grants {
		op1 := &h[g1]
		j := sort.Search(len(grants), func(j int) bool { return h[grants[j]].Call > op1.Return })
		if j == len(grants) {
			continue
		}
		g2 := grants[sufMin[j]]
		bound := leaseEnd(op1, op1.Call, d.life)
		if c, ok := relCall[op1.Input.Owner]; ok && c < bound {
			// A release called at or before g2's return may come between.
			if h[g2].Return >= c {
				continue
			}
		}
		if h[g2].Return < bound {
			return []int{g1, g2}
		}
	}
	return nil
}

// allKnown reports whether w holds every operation of ops with a known
// outcome.
func allKnown[I, O any](h []Operation[I, O], ops, w []int) bool {
	known := 0
	for _, i := range ops {
		if !h[i].Unknown {
			known++
		}
	}
	for _, i := range w {
		if !h[i].Unknown {
			known--
		}
	}
	return known == 0
}
