package linearize

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"reflect"
	"slices"
	"sync/atomic"
	"time"
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

// splitCap is the steps per operation (plus 1024) the search of a model's
// own Step may take on a partition with an unknown operation before the
// search on sets takes it over.
const splitCap = 8

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
	w := make([]int, 0, len(lin))
	for i, x := range lin {
		if keep[i] {
			w = append(w, x)
		}
	}
	return w, true
}

// decideSplitThenSets decides history as Check does for a model without a
// decider of its own: the search of m's Step on every partition, capped
// at capSplit steps per operation on those with an unknown operation (0:
// uncapped), then alternate on the ones it left undecided, one partition
// at a time. For an Illegal verdict found on sets it also returns the
// search on sets, which shrinks the counterexample; otherwise nil (m
// shrinks it).
func decideSplitThenSets[S, I, O any](ctx context.Context, m *filled[S, I, O], history []Operation[I, O], opts Options, b *budget, capSplit int) (Result, *subset[S, I, O]) {
	m.unknownCap = capSplit
	res := decide(ctx, m, history, nil, opts, b)
	m.unknownCap = 0
	if res.Verdict != Unknown || b.cancelled.Load() || b.memHit.Load() {
		return res, nil
	}
	var found *subset[S, I, O]
	for i := range res.Partitions {
		p := &res.Partitions[i]
		if p.Verdict != Unknown {
			continue
		}
		u := newSubset(m)
		var fromSets bool
		*p, fromSets = alternate(ctx, m, u, history, Partition{Key: p.Key, Ops: p.Ops}, b)
		if p.Verdict == Illegal {
			if fromSets {
				found = u
			}
			break
		}
		if p.Verdict == Unknown {
			break // out of time or memory
		}
	}
	verdictOf(ctx, &res, b)
	return res, found
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

// alternate decides partition p by the search on sets and the search of
// m's Step in turn, each for twice the time of the round before (from
// firstRound on), until one of them decides. Neither is always the
// faster: the sets stay small where unknown acquires overlap known ones,
// but when a violation must be proved every placement of an unknown
// acquire is a set of its own, and a step on sets costs as many steps of
// the model as the set has members. Rounds by time, not steps, keep the
// total within a small factor of the faster search's own time (about 4,
// at most 8). It reports whether the search on sets decided. An Ok
// witness from the sets is turned into one of m.
func alternate[S, I, O any](ctx context.Context, m *filled[S, I, O], u *subset[S, I, O], history []Operation[I, O], p Partition, b *budget) (Partition, bool) {
	for round := firstRound; ; round *= 2 {
		u.set.until = time.Now().Add(round)
		sub := decideSets(u, history, p, b)
		u.set.until = time.Time{}
		if sub.Verdict == Ok {
			w, ok := u.witness(history, sub.Linearization, sub.trail)
			sub.Linearization, sub.trail = w, nil
			if ok {
				return sub, true
			}
			sub.Verdict = Unknown // not expected: the search of m's Step decides
		}
		if sub.Verdict == Illegal || b.cancelled.Load() || b.memHit.Load() {
			return sub, true
		}
		m.until = time.Now().Add(round)
		sub = decide(ctx, m, history, []Partition{{Key: p.Key, Ops: p.Ops}}, Options{Workers: 1}, b).Partitions[0]
		m.until = time.Time{}
		if sub.Verdict != Unknown || b.cancelled.Load() || b.memHit.Load() {
			return sub, false
		}
	}
}

// firstRound is the time of alternate's first round of each search.
const firstRound = time.Millisecond

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
