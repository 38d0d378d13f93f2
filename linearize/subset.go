package linearize

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"reflect"
	"slices"
	"sync/atomic"
)

// The generic search's way with unknown outcomes, when splitting them
// does not decide a partition quickly.
//
// The search of a model's own Step tries an unknown operation twice, with
// its effect and without, and the two branches reach different states: on
// a lock history every combination of unknown acquires that took effect
// gives its own holder, token and expiry, and a correct history of 100
// operations with 35 unknown acquires took millions of configurations.
// porcupine, given the same model as a nondeterministic one, searches on
// sets of states (its power-set construction) and decides such histories
// in milliseconds. The search on sets does the same for any model: a
// state is the set of the model's states the operations so far may have
// led to, and an unknown operation steps to the union of its effect and
// its absence, so that it never splits the search. A linearization of the
// sets is one of the model once a path through the sets is picked
// (subset.witness).
//
// Check runs the search of the model's own Step first, capped at
// splitCap steps per operation on partitions with an unknown operation
// (most are decided in a few steps per operation); on the partitions it
// leaves undecided the search on sets and the search of the Step take
// turns (alternate).

// splitCap is the steps per operation (plus capSlack) the search of a
// model's own Step may take on a partition with an unknown operation
// before the search on sets joins in. Where it decides a correct lease
// history of 100 operations at 35% unknown outcomes, it mostly does in
// 100 to 210 steps; where it does not, the search on sets mostly decides
// in 100 to 300 (of 400 such histories), which is what porcupine does.
const splitCap = 2

// stateSet is a non-empty set of a model's states: the ids a subset's
// interner gave them, in increasing order, four bytes each.
type stateSet string

// subset is the search on sets of one model, for one partition at a time
// (its interner is not safe for concurrent use).
type subset[S, I, O any] struct {
	base *filled[S, I, O]
	in   interner[S]
	set  filled[stateSet, I, O]
	seed maphash.Seed
	buf  []S
	ids  []uint32
	pack []byte
	// calls counts the model's Steps the search on sets has taken.
	calls int64

	// relaxation is the relaxed search's own state (newRelaxed); nil in
	// a plain search on sets.
	*relaxation[I, O]
}

// newSubset returns the search on sets of base.
func newSubset[S, I, O any](base *filled[S, I, O]) *subset[S, I, O] {
	u := &subset[S, I, O]{base: base, seed: maphash.MakeSeed(), in: interner[S]{hash: base.Hash, equal: base.Equal}}
	u.in.reset(64)
	u.set = filled[stateSet, I, O]{Model: Model[stateSet, I, O]{
		Init:  func() stateSet { return u.setOf([]uint32{u.in.id(base.Init())}) },
		Step:  u.step,
		Equal: func(a, b stateSet) bool { return a == b },
		Hash:  func(s stateSet) uint64 { return maphash.String(u.seed, string(s)) },
		// A read-only operation of the model is a filter on sets; the
		// search takes it greedily only where it keeps the whole set,
		// and a set accepts at least what its subsets accept.
		ReadOnly:          base.ReadOnly,
		Partition:         base.Partition,
		DescribeOperation: base.DescribeOperation,
		DescribeState: func(s stateSet) string {
			if len(s) == 4 {
				return base.DescribeState(u.in.state(memberAt(s, 0)))
			}
			return fmt.Sprintf("one of %d states", len(s)/4)
		},
		superset: true,
	}}
	if base.spent != nil && reflect.ValueOf(base.Step).Pointer() == base.fastStep {
		u.set.retired = func(set stateSet, op *Operation[I, O]) bool {
			for i := range len(set) / 4 {
				if !base.spent(u.in.state(memberAt(set, i)), op) {
					return false
				}
			}
			return true
		}
	}
	return u
}

func memberAt(s stateSet, i int) uint32 { return binary.LittleEndian.Uint32([]byte(s[4*i : 4*i+4])) }

// setOf returns the set of ids (sorted and deduplicated in place).
func (u *subset[S, I, O]) setOf(ids []uint32) stateSet {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	u.pack = u.pack[:0]
	for _, id := range ids {
		u.pack = binary.LittleEndian.AppendUint32(u.pack, id)
	}
	return stateSet(u.pack)
}

// step is the model's Step lifted to sets: the union of the members' next
// states, and for an unknown operation the set itself too.
func (u *subset[S, I, O]) step(dst []stateSet, set stateSet, op *Operation[I, O]) []stateSet {
	ids := u.ids[:0]
	u.calls += int64(len(set) / 4)
	for i := range len(set) / 4 {
		id := memberAt(set, i)
		u.buf = u.base.Step(u.buf[:0], u.in.state(id), op)
		for _, s := range u.buf {
			ids = append(ids, u.in.id(s))
		}
		if op.Unknown {
			ids = append(ids, id)
		}
	}
	u.ids = ids
	if len(ids) == 0 {
		return dst
	}
	return append(dst, u.setOf(ids))
}

// has reports whether id is a member of set.
func has(set stateSet, id uint32) bool {
	lo, hi := 0, len(set)/4
	for lo < hi {
		mid := (lo + hi) / 2
		switch x := memberAt(set, mid); {
		case x == id:
			return true
		case x < id:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return false
}

// witness turns a linearization lin found on the sets (trail: the set
// after each of its operations) into one of the model: it picks a path
// through the sets backwards, from any member of the last, leaving out
// the unknown operations the path does not need. Each operation kept
// leads from the state picked before it to the one picked after, by
// construction; it reports false if the trail does not fit lin.
func (u *subset[S, I, O]) witness(h []Operation[I, O], lin []int, trail any) ([]int, bool) {
	after, _ := trail.([]stateSet)
	if len(after) != len(lin) {
		return nil, false
	}
	sets := append([]stateSet{u.set.Init()}, after...)
	cur := memberAt(sets[len(lin)], 0)
	keep := make([]bool, len(lin))
	for i := len(lin) - 1; i >= 0; i-- {
		op := &h[lin[i]]
		if op.Unknown && has(sets[i], cur) {
			continue // never took effect
		}
		found := false
		for j := 0; j < len(sets[i])/4 && !found; j++ {
			p := memberAt(sets[i], j)
			u.buf = u.base.Step(u.buf[:0], u.in.state(p), op)
			for _, s := range u.buf {
				if u.in.id(s) == cur {
					cur, found, keep[i] = p, true, true
					break
				}
			}
		}
		if !found {
			return nil, false
		}
	}
	return kept(lin, keep), true
}

// kept returns the operations of lin whose keep is set, in lin's order:
// a witness without the unknown operations that did not take effect.
func kept(lin []int, keep []bool) []int {
	w := make([]int, 0, len(lin))
	for i, x := range lin {
		if keep[i] {
			w = append(w, x)
		}
	}
	return w
}

// decideSplitThenSets decides history as Check does for a model without a
// decider of its own: the search of m's Step on the partitions without
// an unknown operation, in parallel (decide), and alternate on the
// others, one partition at a time; capSplit 0 runs the search of m's Step
// alone on every partition, uncapped (the tests' oracle). For an Illegal
// verdict found on sets, or by the relaxed search, it also returns that
// search, which shrinks the counterexample; otherwise nil (m shrinks it).
func decideSplitThenSets[S, I, O any](ctx context.Context, m *filled[S, I, O], history []Operation[I, O], opts Options, b *budget, capSplit int) (Result, *subset[S, I, O]) {
	if capSplit == 0 {
		return decide(ctx, m, history, nil, opts, b), nil
	}
	parts := partition(m, history)
	someUnknown := false
	for i := range parts {
		someUnknown = someUnknown || !allKnownOps(history, parts[i].Ops)
	}
	if !someUnknown {
		return decide(ctx, m, history, parts, opts, b), nil
	}
	var known []Partition
	var at []int
	for i := range parts {
		parts[i].Verdict = Unknown
		if allKnownOps(history, parts[i].Ops) {
			known, at = append(known, parts[i]), append(at, i)
		}
	}
	res := Result{Partitions: parts}
	if len(known) > 0 {
		sub := decide(ctx, m, history, known, opts, b)
		for j, i := range at {
			parts[i] = sub.Partitions[j]
		}
		if sub.Verdict == Illegal {
			verdictOf(ctx, &res, b)
			return res, nil
		}
	}
	var found *subset[S, I, O]
	for i := range parts {
		p := &parts[i]
		if p.Verdict != Unknown || b.out() {
			continue
		}
		var u *subset[S, I, O]
		*p, u = alternate(m, history, Partition{Key: p.Key, Ops: p.Ops}, b, capSplit)
		if p.Verdict == Illegal {
			found = u
			break
		}
	}
	verdictOf(ctx, &res, b)
	return res, found
}

// allKnownOps reports whether every operation of ops has a known outcome.
func allKnownOps[I, O any](h []Operation[I, O], ops []int) bool {
	for _, i := range ops {
		if h[i].Unknown {
			return false
		}
	}
	return true
}

// checkGeneric is Check for a model without a decider of its own, or
// whose decider left the history to the generic search:
// decideSplitThenSets (capSplit as there), then shrinking an Illegal
// partition with the search that found it.
func checkGeneric[S, I, O any](parent, ctx context.Context, m *filled[S, I, O], history []Operation[I, O], opts Options, b *budget, capSplit int) Result {
	res, sets := decideSplitThenSets(ctx, m, history, opts, b, capSplit)
	if res.Verdict == Illegal {
		ops := res.Partitions[res.FailingPartition].Ops
		if sets != nil {
			res.Counterexample, res.Minimal, res.ShrinkElapsed = shrinkWithin(parent, &sets.set, history, ops, res.Blocker, opts)
		} else {
			res.Counterexample, res.Minimal, res.ShrinkElapsed = shrinkWithin(parent, m, history, ops, res.Blocker, opts)
		}
	}
	return res
}

// alternate decides partition p by the search of m's Step and the search
// on sets in turn, until one of them decides. The search of m's Step goes
// first, for capSplit steps per operation (plus capSlack): most partitions
// are decided there. Then each round lets the search on sets go on for
// twice as many steps as the first round took, doubled at each round, and the
// search of m's Step for splitShare times that: a run pauses at its budget,
// keeping its tables, and the next run goes on from there, so no round
// repeats the work of the one before. Neither search is always the faster: the sets
// stay small where unknown acquires overlap known ones, but when a
// violation must be proved every placement of an unknown acquire is a
// set of its own, and a step on sets takes a step of the model per
// member. The two together take about 1 + 1/splitShare times what the
// search of m's Step takes alone where it decides (past its first round,
// plus up to twice that round), or 1 + splitShare times what the search
// on sets takes where that decides (past twice the first round), counted in
// steps (a round's budget is checked every 64 steps). After the search
// on sets, the relaxed search (relax.go) runs in each round too,
// afresh, with relaxedShare counted in the model's Steps:
// where the violation lies between known operations it proves Illegal
// without going through the unknown ones' choices. It returns the search
// on sets, or the relaxed one, if that decided, else nil. An Ok
// witness from the sets is turned into one of m.
func alternate[S, I, O any](m *filled[S, I, O], history []Operation[I, O], p Partition, b *budget, capSplit int) (Partition, *subset[S, I, O]) {
	var abort atomic.Bool
	split := getSearcher(m, history, b, &abort)
	defer putSearcher(split)
	split.reset(p.Ops)
	split.pausable = true
	defer func() { m.over = nil }()
	steps := uint32(capSplit*len(p.Ops) + capSlack)
	m.over = func(tick uint32) bool { return tick > steps }
	out := split.run()
	if out.verdict != Unknown || !out.paused {
		return outcomeOf(p, out), nil
	}

	u := newSubset(m)
	sets := getSearcher(&u.set, history, b, &abort)
	defer putSearcher(sets)
	sets.reset(p.Ops)
	sets.pausable = true
	var (
		r       *subset[S, I, O]
		relaxed *searcher[stateSet, I, O] // nil before the first round's, or once dropped
	)
	defer func() {
		if relaxed != nil {
			putSearcher(relaxed)
		}
	}()
	// Budgets in steps, each search's own count (a paused run keeps it),
	// never in wall time: the same history then takes the same turns on
	// any machine at any load, so the search that decides it, and the
	// witness or counterexample it returns, are the same in every run.
	setsUntil, splitUntil := uint32(0), steps
	m.over = func(tick uint32) bool { return tick > splitUntil }
	u.set.over = func(tick uint32) bool { return tick > setsUntil }
	// The first round on sets is twice the Step's: see splitShare.
	for round := 2 * uint64(steps); ; round *= 2 {
		setsUntil = capTicks(uint64(setsUntil) + round)
		out = sets.run()
		if out.verdict == Ok {
			sub := outcomeOf(p, out)
			w, ok := u.witness(history, sub.Linearization, sub.trail)
			sub.Linearization, sub.trail = w, nil
			if ok {
				return sub, u
			}
			// Not expected: the search of m's Step decides alone.
			m.over = nil
			return outcomeOf(p, split.run()), nil
		}
		if out.verdict != Unknown || !out.paused {
			return outcomeOf(p, out), u
		}
		if r == nil { // made only for a partition the first round leaves
			r = newRelaxed(m, history)
			relaxed = getSearcher(&r.set, history, b, &abort)
		}
		if relaxed != nil {
			// A semi-decider (relax.go): only its Illegal counts. It
			// counts the model's Steps (one of its steps closes a set
			// under the unknown operations: many Steps), and starts
			// afresh each round, with relaxedShare.
			r.limit = r.calls + int64(relaxedShare*round)
			relaxed.reset(p.Ops)
			out = relaxed.run()
			switch {
			case out.verdict == Illegal:
				r.limit = 0 // shrinking runs it again, unbounded
				return outcomeOf(p, out), r
			case out.verdict == Ok || r.blown || b.out():
				putSearcher(relaxed)
				relaxed = nil
			}
		}
		splitUntil = capTicks(uint64(splitUntil) + splitShare*round)
		out = split.run()
		if out.verdict != Unknown || !out.paused {
			return outcomeOf(p, out), nil
		}
	}
}

// relaxedShare is how many of the model's Steps the relaxed search may
// take in each of alternate's rounds, per step of the round on sets. A
// Step of the relaxed search's closures is cheaper than a step of the
// split search (no memo, no stack), so it gets four times the split
// search's share (splitShare): lease histories with a token that went
// down among many unknown acquires were then decided in about half the
// time, and the etcd logs in the same.
const relaxedShare = 4 * splitShare

// capTicks bounds a step budget by what a searcher's tick can count.
func capTicks(n uint64) uint32 { return uint32(min(n, math.MaxUint32-64)) }

// capSlack is the steps a capped search (filled.stepCap, alternate's
// first round) may take beyond its steps per operation. It is as small as
// the budget's check (every 64 steps) allows: on a partition of 100
// operations, a slack of 1024 steps was most of the first round, and
// where the search of the model's Step could not decide it, that round
// took longer than the whole search on sets after it.
const capSlack = 64

// splitShare is how many times longer than the search on sets the search
// of m's Step goes on in each of alternate's rounds: the search of the
// Step is the one most partitions need (on the Jepsen etcd logs, the 13
// of 102 that went on past a first round of 8 steps per operation plus
// 1024 were all decided by it): with a share of 2 the whole set took 1.7
// times as long as the search of the Step alone, with 4 1.45, with 8 1.3
// (rounds then timed). With the short first round (capSlack), a share of
// 4 made the etcd logs allocate 18% more and take longer in paired runs
// (0.34 to 0.41 of porcupine's time in 3 paired runs, 0.27 to 0.29 before), while a share
// of 8 with the search on sets' first round as long as the Step's
// left a lease history (sets decide in 335 steps, the Step in 5,113) at
// 1.5 times porcupine's time: so the search on sets gets twice the first
// round's steps in its first round, and the shares from there are 1 to 8.
const splitShare = 8

// outcomeOf is partition p with the outcome of its search.
func outcomeOf(p Partition, out outcome) Partition {
	p.Verdict, p.Linearization, p.States, p.blocker, p.trail = out.verdict, out.order, out.states, out.blocker, out.trail
	return p
}

// decideSets runs the search on sets of u on partition p.
func decideSets[S, I, O any](u *subset[S, I, O], history []Operation[I, O], p Partition, b *budget) Partition {
	var abort atomic.Bool
	sr := getSearcher(&u.set, history, b, &abort)
	sr.reset(p.Ops)
	out := sr.run()
	putSearcher(sr)
	p.Verdict, p.Linearization, p.States, p.blocker, p.trail = out.verdict, out.order, out.states, out.blocker, out.trail
	return p
}
