package linearize

import (
	"slices"
	"sort"
)

// The relaxed search: a quick proof that a partition is Illegal when its
// violation lies between operations with known outcomes and unknown ones
// only stand around it.
//
// Both exact searches pay for every way the unknown operations may have
// taken effect before they can conclude Illegal: the search of the
// model's Step splits each of them into effect and absence, and the
// search on sets places each of them at every point where it changes the
// set. On a lease history with many unknown acquires, where a grant with
// token 3 returned before a grant with token 2 was called, both take long:
// every subset of the unknown acquires gives another holder, token or
// expiry, and each of them fails at the same grant (docs/linearize.md).
//
// The relaxed search forgets which unknown operations took effect. It is
// the search on sets of the known operations alone, in which, before a
// known operation k steps, the set is closed under the unknown operations
// called no later than k's return: every state that firing them, in any
// order and any number of times up to their count, leads to from a
// member is added. The unknown operations themselves are no-ops in its
// list, settled as soon as the scan reaches them.
//
// Soundness (an Illegal from the relaxed search is an Illegal history):
// every linearization L of the history is a path of the relaxed search.
// Say L has linearized the known operations K, in state s, and k is the
// next known one in L. The unknown operations L places between them are
// distinct, called no later than their linearization points, which come
// before k's, so no later than k's return: the closure before k holds
// the state they lead to, and the step of k the state after k in L. k
// is a candidate in the relaxed search where it is in L (the relaxed
// search keeps every known operation's call and return in its list), so
// by induction on the known operations left the search reaches, from a
// configuration L passes through, a configuration L passes through with
// one more known operation, and the memo never cuts it off (a
// configuration explored before and failed would have failed with a
// linearization through it, which the induction rules out). Lifting an
// unknown operation changes neither the set nor any candidacy (it has
// no return), so L passes through the configuration after it too. A
// read-only
// operation r taken greedily keeps the set as it is, so r accepts every
// member, the state s of L among them: L with r moved to that point
// (r's call precedes every remaining return, it is a candidate) is a
// linearization too, and passes through the configuration taken. So a
// relaxed search that runs out of configurations has ruled out every
// linearization. Its Ok means nothing (it may fire an unknown operation
// twice, or before an operation that returned before that unknown one's
// call): only its Illegal is used, and Ok drops it.
//
// An Illegal partition it proves is shrunk with it (checkGeneric): each
// sub-history shrinking keeps is Illegal by the same argument. Minimal
// then means minimal for the relaxed search, which is the exact search
// on sets where the counterexample holds no unknown operation (the usual
// case: dropping one only shrinks the closures).
//
// A closure may not end (a counter bumped by an unknown operation over
// and over), and may be long (every unknown acquire of a lock history
// gives other holders, tokens and expiries): it stops at relaxedMembers
// states, or once the search has taken its budget of the model's Steps
// (relaxation.limit), and the search that needed it can then conclude
// nothing (filled.unsure). alternate runs it afresh at each of its
// rounds, with a larger budget: a run cut short has memoized
// configurations on incomplete steps, so it cannot go on where it
// stopped. Its closures go on, though: the complete ones are kept
// (closeCached), and the one cut short resumes where it stopped.

// relaxedMembers caps the states of one closure of the relaxed search:
// past it the closure is left incomplete, and the search that made it
// may no longer conclude Illegal. The budget of Steps bounds a closure's
// time; this bounds its memory (a few MiB). A lease history of 37
// operations with 16 unknown acquires before a token that went down
// needs closures of 36,878 states (a history of TestSetsDifferential's
// that 1 << 15 left undecided).
const relaxedMembers = 1 << 18

// relaxation is what the relaxed search keeps beside the search on sets
// it is built on: the history, the unknown operations of the current
// search by call, whether a closure was left incomplete and the budget
// that cuts one short, and the closures' scratch space.
type relaxation[I, O any] struct {
	hist   []Operation[I, O]
	bg     []*Operation[I, O]
	blown  bool  // a closure reached relaxedMembers states
	cut    bool  // a closure was stopped at limit
	limit  int64 // of calls, 0 for none
	seen   map[uint32]struct{}
	closed []uint32
	// closures remembers closures (closeCached), cached counts their
	// states, partial is one cut short, prev is the bg they were made
	// with.
	closures map[closure][]uint32
	cached   int
	partial  partialClosure
	prev     []*Operation[I, O]
	b        *budget // of the current search
}

// newRelaxed returns the relaxed search of base over hist: a search on
// sets (subset) whose steps close the set under the unknown operations of
// the operations the searcher was last reset with (see relaxedStep).
func newRelaxed[S, I, O any](base *filled[S, I, O], hist []Operation[I, O]) *subset[S, I, O] {
	u := newSubset(base)
	u.relaxation = &relaxation[I, O]{hist: hist}
	u.set.Step = u.relaxedStep
	u.set.retired = func(stateSet, *Operation[I, O]) bool { return true } // a no-op here
	u.set.prepare = u.prepare
	u.set.unsure = func() bool { return u.blown || u.cut }
	return u
}

// prepare takes the unknown operations of ops (history indices) as the
// ones the closures fire, in call order, and b as the budget they look
// at, and forgets that a closure of the previous search was incomplete.
func (u *subset[S, I, O]) prepare(ops []int, b *budget) {
	u.b = b
	u.prev, u.bg = u.bg, u.prev[:0]
	for _, i := range ops {
		if op := &u.hist[i]; op.Unknown {
			u.bg = append(u.bg, op)
		}
	}
	sort.SliceStable(u.bg, func(a, b int) bool { return u.bg[a].Call < u.bg[b].Call })
	u.blown, u.cut = false, false
	if !slices.Equal(u.bg, u.prev) {
		clear(u.closures) // closures under other operations
		u.cached, u.partial = 0, partialClosure{}
	}
}

// relaxedStep is the relaxed search's Step: an unknown operation changes
// nothing (the closures stand for it); a known one steps every member of
// the set closed under the unknown operations called no later than its
// return.
func (u *subset[S, I, O]) relaxedStep(dst []stateSet, set stateSet, op *Operation[I, O]) []stateSet {
	if op.Unknown {
		return append(dst, set)
	}
	if u.limit > 0 && u.calls > u.limit {
		u.cut = true
	}
	if u.blown || u.cut {
		return dst // the search can conclude nothing now (unsure)
	}
	j := sort.Search(len(u.bg), func(i int) bool { return u.bg[i].Call > op.Return })
	from := u.closeCached(set, j)
	if from == nil {
		return dst
	}
	ids := u.ids[:0]
	u.calls += int64(len(from))
	for _, id := range from {
		u.buf = u.base.Step(u.buf[:0], u.in.state(id), op)
		for _, s := range u.buf {
			ids = append(ids, u.in.id(s))
		}
	}
	u.ids = ids
	if len(ids) == 0 {
		return dst
	}
	return append(dst, u.setOf(ids))
}

// closure is the key of a closure in relaxation.closures: the set, and
// how many of relaxation.bg it was closed under.
type closure struct {
	set stateSet
	j   int
}

// relaxedCache caps the states held by relaxation.closures.
const relaxedCache = 1 << 20

// closeCached is close, remembering what it returns for set and
// bg[:j]: the relaxed search steps from a set with many operations, and
// alternate runs it afresh each round, so the same closures come back
// (on a lease history of 34 operations, 55 closures of 7 sets).
func (u *subset[S, I, O]) closeCached(set stateSet, j int) []uint32 {
	key := closure{set, j}
	if c, ok := u.closures[key]; ok {
		return c
	}
	c := u.close(key, u.bg[:j])
	if c != nil && u.cached+len(c) <= relaxedCache {
		if u.closures == nil {
			u.closures = make(map[closure][]uint32)
		}
		u.closures[key] = slices.Clone(c)
		u.cached += len(c)
	}
	return c
}

// close returns the members of set and every state firing the operations
// of bg leads to from them, in sequences of up to len(bg) steps (each one
// at most once is all a linearization needs; repeats are let in rather
// than tracked). A closure past relaxedMembers states sets blown, and
// one past the budget of Steps (limit), or the Check's, sets cut; either
// returns nil. A
// closure cut short is kept (partial), and the next closure of the same
// key goes on from there: the next round's run comes back to it.
func (u *subset[S, I, O]) close(key closure, bg []*Operation[I, O]) []uint32 {
	var at bfs
	if u.partial.at.all != nil && u.partial.key == key {
		at, u.partial = u.partial.at, partialClosure{}
		at.all = append(u.closed[:0], at.all...)
	} else {
		at.all = u.closed[:0]
		for i := range len(key.set) / 4 {
			at.all = append(at.all, memberAt(key.set, i))
		}
		at.hi = len(at.all)
	}
	if len(bg) > 0 {
		if u.seen == nil {
			u.seen = make(map[uint32]struct{})
		}
		clear(u.seen)
		for _, id := range at.all {
			u.seen[id] = struct{}{}
		}
		// Breadth first: the states at depth d are those d firings lead
		// to, so len(bg) levels hold every sequence of distinct ones.
		for at.lo < at.hi && at.depth < len(bg) {
			for ; at.x < at.hi; at.x++ {
				if u.limit > 0 && u.calls > u.limit || at.x&255 == 0 && u.b != nil && (u.b.cancelled.Load() || !u.b.spend(256)) {
					u.cut = true
					u.closed = at.all
					u.partial = partialClosure{key: key, at: at}
					u.partial.at.all = slices.Clone(at.all)
					return nil
				}
				from := u.in.state(at.all[at.x])
				for _, op := range bg {
					u.buf = u.base.Step(u.buf[:0], from, op)
					u.calls++
					for _, s := range u.buf {
						id := u.in.id(s)
						if _, ok := u.seen[id]; ok {
							continue
						}
						if len(at.all) == relaxedMembers {
							u.blown = true
							u.closed = at.all
							return nil
						}
						u.seen[id] = struct{}{}
						at.all = append(at.all, id)
					}
				}
			}
			at.lo, at.hi, at.depth = at.hi, len(at.all), at.depth+1
		}
	}
	u.closed = at.all
	return at.all
}

// bfs is where a closure stands: the states found (all), the level
// being expanded (all[lo:hi], depth), and the next of them to expand (x).
type bfs struct {
	all              []uint32
	lo, hi, x, depth int
}

// partialClosure is a closure cut short (all nil: none).
type partialClosure struct {
	key closure
	at  bfs
}
