package linearize

import (
	"math/bits"
	"slices"
	"sort"
	"sync/atomic"
)

// budget is what all searches of one Check share: the stop signals and the
// memory used by the memo tables in flight.
type budget struct {
	cancelled atomic.Bool // ctx done or time limit passed
	memHit    atomic.Bool // MaxMemory exceeded
	stepHit   atomic.Bool // MaxSteps spent
	memUsed   atomic.Int64
	steps     atomic.Int64
	maxMem    int64 // 0: no cap
	maxSteps  int64 // 0: no cap
	unwatch   func() bool
}

// spend counts n steps of search and reports whether MaxSteps still holds.
func (b *budget) spend(n int64) bool {
	if s := b.steps.Add(n); b.maxSteps > 0 && s > b.maxSteps {
		b.stepHit.Store(true)
		return false
	}
	return true
}

// out reports whether the budget has run out: ctx, memory or steps.
func (b *budget) out() bool {
	return b.cancelled.Load() || b.memHit.Load() || b.stepHit.Load()
}

// stop releases the budget's watch of its ctx.
func (b *budget) stop() {
	if b.unwatch != nil {
		b.unwatch()
	}
}

// charge adds n bytes (possibly negative) and reports whether the cap holds.
func (b *budget) charge(n int64) bool {
	used := b.memUsed.Add(n)
	if b.maxMem > 0 && used > b.maxMem {
		b.memHit.Store(true)
		return false
	}
	return true
}

// outcome of one search.
type outcome struct {
	verdict Verdict
	order   []int // Ok: history indices in linearization order
	trail   any   // Ok, for a set-valued model (Model.superset): []S, the state after each of order
	states  int   // memo entries created
	// blocker, for Illegal: the history index of the operation whose
	// return stopped the search when it had linearized the most known
	// operations (the first time it got that far); -1 if none.
	blocker int
	// paused: the run stopped at its cap and can go on (searcher.pausable).
	paused bool
}

// frame is one linearized operation on the search stack.
type frame struct {
	op   int32  // local index
	prev uint32 // state id before the operation
	// The next states to try are alts[altNext:altEnd] of the searcher;
	// alts[altNext-1] is the one taken. A frame's alternatives sit above
	// those of the frames below it, so popping truncates alts.
	altLo, altNext, altEnd int32
	// greedy: a read-only operation taken without trying the others; if
	// it fails, the configuration before it fails too.
	greedy bool
	// first and top before the operation (see searcher).
	first, top int32
	// pooled: the operation is the pool's next (see searcher.tryPool).
	pooled bool
}

// searcher is the Wing & Gong / Lowe search over one partition.
//
// Events sit in a doubly linked list in time order: a call and a return
// for each operation with a known outcome, a call only for an unknown one.
// The candidates to linearize next are the calls before the first return
// still in the list. Linearizing an operation lifts its events out of the
// list (dancing links), so undoing it is O(1).
//
// An unknown operation is decided when the scan reaches it, like any
// candidate: first without its effect (the state stays: it never took
// effect, or took effect as a no-op), then with it (each state Step
// allows); either way it leaves the list. Left pending, it stays a
// candidate, which covers an effect at any later instant. Deciding early
// keeps the search from retrying every old unknown operation at every dead
// end, which on histories with many timeouts is where the time would go. The search
// succeeds as soon as every known operation is linearized.
type searcher[S, I, O any] struct {
	m     *filled[S, I, O]
	hist  []Operation[I, O]
	ops   []int // local index -> history index
	next  []int32
	prev  []int32
	zob   []uint64
	bits  []uint64 // the linearized set, then max(win, 1) zero words
	words int      // of the linearized set
	known int      // operations with a known outcome
	// first is the first operation not linearized (every one before it
	// is), top the number of words of bits up to the last nonzero one.
	first, top int32
	// win, when not 0, is the width in words of the memo's entries: a
	// linearized set whose words from first's on are zero after win of
	// them is stored as that window (see remember); the others go to wide.
	win   int
	b     *budget
	abort *atomic.Bool // another partition already failed; may be nil
	// slow, if set, is called every 1024 steps (runPartitions starts its
	// other workers then); it may clear itself.
	slow func()

	states  interner[S]
	trans   transitions
	memo    memo
	wide    memo
	buf     []S
	ids     []uint32
	alts    []uint32 // the frames' alternatives, a stack
	stack   []frame
	events  []event // the calls (every event if they are out of order)
	rets    []event // the returns, sorted
	charged int64
	// The step cache starts once the search is big enough to repay it,
	// and is dropped again when it misses more than it hits.
	cacheOn, cacheOff bool
	hits, misses      int
	// deepest is the most known operations linearized at a dead end so
	// far, blocker the operation whose return stopped the search there.
	deepest int
	blocker int
	// spent[k], for an unknown operation k, is the stack depth down to
	// which try skips k's no-effect step, or none (see try); marks lists
	// the operations marked, in the order of their depths, so that
	// backtracking above a depth clears its marks.
	spent []int32
	marks []int32
	// reads[k] is two more than the interned hash (see interner.id) of
	// the states known operation k may be accepted in, per
	// Model.ReadHash; 1 when there is none, 0 until k is first tried.
	reads []uint64
	// pausable: a run that runs out of its cap (filled.stepCap
	// or over) pauses instead of ending, and the next run goes
	// on from there (alternate's rounds); paused holds where it stopped.
	pausable bool
	paused   pausedRun
	// pool lists the pooled operations (filled.pooled; local indices, by
	// call), which stay out of the event list; the first poolNext of them
	// are placed. Their bits are set from the start, so that the pool is
	// in the memo through pairs alone: the id of (state id, poolNext).
	pool     []int32
	poolNext int32
	pairs    map[uint64]uint32
}

const none = int32(-1)

// cacheAfter is the number of memoized configurations after which the step
// cache starts: below it, a search is over before the cache pays for its
// tables. It starts only when there are more than two configurations per
// distinct state: with fewer, the same (state, operation) seldom comes
// back.
const cacheAfter = 4096

// newSearcher returns a searcher over hist; reset gives it the operations
// of one search. A searcher keeps its buffers from one search to the next,
// so that checking many small partitions, or shrinking, does not allocate
// them again each time.
func newSearcher[S, I, O any](m *filled[S, I, O], hist []Operation[I, O], b *budget, abort *atomic.Bool) *searcher[S, I, O] {
	s := &searcher[S, I, O]{
		m: m, hist: hist, b: b, abort: abort,
		states: interner[S]{hash: m.Hash, equal: m.Equal},
	}
	return s
}

// event is a call or return of the list, for sorting.
type event struct {
	t    int64
	node int32
}

// reset prepares a search of ops (history indices): it links their events
// in time order. Node 2k is the call of local operation k, node 2k+1 its
// return; node 2n is the head.
func (s *searcher[S, I, O]) reset(ops []int) {
	n := len(ops)
	s.ops = ops
	if s.m.prepare != nil {
		s.m.prepare(ops, s.b)
	}
	s.next = resize(s.next, 2*n+1)
	s.prev = resize(s.prev, 2*n+1)
	s.zob = resize(s.zob, n)
	s.words = (n + 63) / 64
	s.win = window(s.hist, ops)
	if s.win >= s.words {
		s.win = 0 // a window saves nothing
	}
	// At least one word of padding: advanceFirst stops in it when every
	// operation is linearized.
	s.bits = resize(s.bits, s.words+max(s.win, 1))
	clear(s.bits)
	s.first, s.top = 0, 0
	s.states.reset(n)
	if s.win > 0 {
		s.memo.reset(n, s.win, true)
		s.wide.reset(0, s.words, false)
	} else {
		s.memo.reset(n, s.words, false)
		s.wide.reset(0, 0, false)
	}
	s.trans = transitions{}
	// Every operation is on the stack at most once, most with one or two
	// next states: room for n of each spares the stack's regrowth.
	s.alts, s.stack = reserve(s.alts, n), reserve(s.stack, n)
	s.known, s.charged = 0, 0
	s.paused = pausedRun{}
	s.cacheOn, s.cacheOff, s.hits, s.misses = false, false, 0, 0
	s.deepest, s.blocker = 0, -1
	s.spent = resize(s.spent, n)
	for k := range s.spent {
		s.spent[k] = none
	}
	s.marks = s.marks[:0]
	s.reads = resize(s.reads, n)
	clear(s.reads)
	s.pool, s.poolNext = s.pool[:0], 0
	if s.m.superset && s.m.pooled != nil {
		for k, hi := range ops {
			if op := &s.hist[hi]; op.Unknown && s.m.pooled(op) {
				s.pool = append(s.pool, int32(k))
				s.bits[k>>6] |= 1 << (k & 63)
			}
		}
		s.advanceFirst()
	}
	if len(s.pool) > 0 {
		s.pairs = make(map[uint64]uint32)
	} else {
		s.pairs = nil
	}

	// The calls come in order when ops are by call (they are, from
	// partition and shrink): only the returns need sorting, and a merge
	// links both.
	calls, rets := reserve(s.events, n), reserve(s.rets, n)
	inOrder := true
	pooled := s.pool
	for k, hi := range ops {
		op := &s.hist[hi]
		s.zob[k] = zobrist(uint64(k))
		if len(pooled) > 0 && pooled[0] == int32(k) {
			pooled = pooled[1:]
			continue // out of the list
		}
		if len(calls) > 0 && op.Call < calls[len(calls)-1].t {
			inOrder = false
		}
		calls = append(calls, event{op.Call, int32(2 * k)})
		if !op.Unknown {
			rets = append(rets, event{op.Return, int32(2*k + 1)})
			s.known++
		}
	}
	// Calls before returns at equal times: intervals are closed.
	byTime := func(a, b event) int {
		if a.t != b.t {
			return cmpInt64(a.t, b.t)
		}
		if ra, rb := a.node&1, b.node&1; ra != rb {
			return int(ra - rb)
		}
		return int(a.node - b.node)
	}
	if !inOrder {
		calls = append(calls, rets...)
		rets = rets[:0]
		slices.SortFunc(calls, byTime)
	} else {
		sortReturns(rets)
	}
	s.events, s.rets = calls, rets
	last := int32(2 * n) // head
	s.prev[last] = none
	for i, j := 0, 0; i < len(calls) || j < len(rets); {
		var x int32
		if j == len(rets) || i < len(calls) && calls[i].t <= rets[j].t {
			x, i = calls[i].node, i+1
		} else {
			x, j = rets[j].node, j+1
		}
		s.next[last] = x
		s.prev[x] = last
		last = x
	}
	s.next[last] = none
}

// sortReturns sorts return events by time, then node. In call order, the
// returns are mostly in order already: an insertion sort, unless it has
// to move them far (then a full sort).
func sortReturns(ev []event) {
	less := func(a, b event) bool { return a.t < b.t || a.t == b.t && a.node < b.node }
	moved := 0
	for i := 1; i < len(ev); i++ {
		e, j := ev[i], i
		for j > 0 && less(e, ev[j-1]) {
			ev[j] = ev[j-1]
			j--
		}
		ev[j] = e
		if moved += i - j; moved > 8*len(ev) {
			slices.SortFunc(ev, func(a, b event) int {
				if a.t != b.t {
					return cmpInt64(a.t, b.t)
				}
				return int(a.node - b.node)
			})
			return
		}
	}
}

// window returns the number of words a window of the linearized set needs
// to hold every set whose first operation not linearized has a known
// outcome: while operation k is not linearized, only operations called
// before its return can be, and ops are in call order. (The window is only
// a representation: a set that does not fit is stored whole, so a wrong
// guess costs memory, never correctness.)
func window[I, O any](hist []Operation[I, O], ops []int) int {
	need := 0
	for k, hi := range ops {
		op := &hist[hi]
		if op.Unknown {
			continue
		}
		// The last operation called at or before k's return.
		j := k + sort.Search(len(ops)-k, func(i int) bool { return hist[ops[k+i]].Call > op.Return }) - 1
		need = max(need, j>>6-k>>6+1)
	}
	return need
}

// resize returns a slice of length n, reusing b's array if it is big enough.
// The contents are not cleared.
func resize[T any](b []T, n int) []T {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]T, n)
}

// reserve returns b emptied, with room for n elements, reusing b's array
// if it is big enough.
func reserve[T any](b []T, n int) []T {
	if cap(b) >= n {
		return b[:0]
	}
	return make([]T, 0, n)
}

func (s *searcher[S, I, O]) head() int32 { return int32(2 * len(s.ops)) }

func (s *searcher[S, I, O]) unlink(x int32) {
	p, n := s.prev[x], s.next[x]
	s.next[p] = n
	if n != none {
		s.prev[n] = p
	}
}

func (s *searcher[S, I, O]) relink(x int32) {
	p, n := s.prev[x], s.next[x]
	s.next[p] = x
	if n != none {
		s.prev[n] = x
	}
}

func (s *searcher[S, I, O]) lift(k int32, known bool) {
	s.unlink(2 * k)
	if known {
		s.unlink(2*k + 1)
	}
}

func (s *searcher[S, I, O]) unlift(k int32, known bool) {
	if known {
		s.relink(2*k + 1)
	}
	s.relink(2 * k)
}

// firstReturn is the history index of the operation of the first return
// in the list, or -1.
func (s *searcher[S, I, O]) firstReturn() int {
	x := s.next[s.head()]
	for x != none && x&1 == 0 {
		x = s.next[x]
	}
	if x == none {
		return -1
	}
	return s.ops[x>>1]
}

// stopped reports whether the search must give up.
func (s *searcher[S, I, O]) stopped() bool {
	return s.b.out() || (s.abort != nil && s.abort.Load())
}

// footprint is the bytes held by the search's tables.
func (s *searcher[S, I, O]) footprint() int64 {
	// A map entry of pairs takes about 16 bytes and its share of buckets.
	return s.states.footprint() + s.trans.footprint() + s.memo.footprint() + s.wide.footprint() + int64(len(s.pairs))*24
}

// account charges the growth of the tables to the budget and reports
// whether the memory cap still holds.
func (s *searcher[S, I, O]) account() bool {
	now := s.footprint()
	grew := now - s.charged
	s.charged = now
	return s.b.charge(grew)
}

// step returns the ids of the states op k leads to from state id: for an
// unknown operation id itself first (no effect), then those Step allows.
func (s *searcher[S, I, O]) step(id uint32, k int32) []uint32 {
	key := transKey(id, k)
	if configs := s.memo.n + s.wide.n; !s.cacheOn && !s.cacheOff && configs > cacheAfter && configs > 2*s.states.states.n {
		s.cacheOn, s.trans = true, transitions{t: newTable(cacheAfter)}
	}
	if s.cacheOn {
		if ids, ok := s.trans.get(key); ok {
			s.hits++
			return ids
		}
		if s.misses++; s.misses&8191 == 0 && s.hits < s.misses {
			// Most steps are new: the cache costs more than it saves.
			s.cacheOn, s.cacheOff, s.trans = false, true, transitions{}
		}
	}
	op := &s.hist[s.ops[k]]
	s.buf = s.m.Step(s.buf[:0], s.states.state(id), op)
	s.ids = s.ids[:0]
	optional := op.Unknown && !s.m.superset // a set-valued Step covers no effect itself
	if optional {
		s.ids = append(s.ids, id) // no effect, tried first
	}
	for i := range s.buf {
		nid := s.states.id(s.buf[i])
		if optional && nid == id {
			continue // the same as no effect
		}
		if !slices.Contains(s.ids, nid) {
			s.ids = append(s.ids, nid)
		}
	}
	if !s.cacheOn {
		return s.ids // valid until the next step: try copies what it keeps
	}
	return s.trans.put(key, s.ids)
}

// run searches for a linearization.
func (s *searcher[S, I, O]) run() (out outcome) {
	defer func() {
		if out.paused {
			return // the tables stay charged until drop
		}
		s.release()
	}()
	var (
		state uint32
		h     uint64
		left  = s.known
		cur   = s.next[s.head()]
		tick  uint32
	)
	if p := &s.paused; p.valid {
		state, h, left, cur, tick = p.state, p.h, p.left, p.cur, p.tick
		p.valid = false
	} else {
		state = s.states.id(s.m.Init())
	}
	for {
		if left == 0 {
			order := make([]int, 0, len(s.stack))
			var trail []S // set-valued models: the state after each of order
			for _, f := range s.stack {
				if id := s.alts[f.altNext-1]; id != f.prev || !s.hist[s.ops[f.op]].Unknown {
					order = append(order, s.ops[f.op])
					if s.m.superset {
						trail = append(trail, s.states.state(id))
					}
				}
			}
			return outcome{verdict: Ok, order: order, trail: trail, states: s.memo.n + s.wide.n, blocker: -1}
		}
		if tick++; tick&1023 == 0 && s.slow != nil {
			s.slow()
		}
		if tick&1023 == 0 && (s.stopped() || !s.account() || !s.b.spend(1024)) {
			return outcome{verdict: Unknown, states: s.memo.n + s.wide.n, blocker: -1}
		}
		// A pausable run's rounds and a capped run may be short, and a
		// step on large sets long: they look at their budget more often.
		if (tick&1023 == 0 || (s.pausable || s.m.stepCap > 0) && tick&63 == 0) && s.capped(tick) {
			if s.pausable {
				s.paused = pausedRun{valid: true, state: state, h: h, left: left, cur: cur, tick: tick}
			}
			return outcome{verdict: Unknown, states: s.memo.n + s.wide.n, blocker: -1, paused: s.pausable}
		}
		if cur != none && cur&1 == 0 {
			k := cur >> 1
			if s.try(k, &state, &h) {
				known := !s.hist[s.ops[k]].Unknown
				s.lift(k, known)
				if known {
					left--
				}
				cur = s.next[s.head()]
			} else {
				cur = s.next[cur]
			}
			continue
		}
		// A return (or the end of the list) comes before any call still to
		// try: the next pooled operation is the last candidate; then try
		// the last step's next state, or undo it.
		if s.tryPool(cur, &state, h) {
			cur = s.next[s.head()]
			continue
		}
		if done := s.known - left; done > s.deepest || s.blocker < 0 {
			s.deepest, s.blocker = done, s.firstReturn()
		}
	backtrack:
		if len(s.stack) == 0 {
			if s.m.unsure != nil && s.m.unsure() {
				// Some step left states out: no proof (filled.unsure).
				return outcome{verdict: Unknown, states: s.memo.n + s.wide.n, blocker: -1}
			}
			return outcome{verdict: Illegal, states: s.memo.n + s.wide.n, blocker: s.blocker}
		}
		// The configuration at this depth is left: marks made at it go.
		for len(s.marks) > 0 && s.spent[s.marks[len(s.marks)-1]] >= int32(len(s.stack)) {
			s.spent[s.marks[len(s.marks)-1]] = none
			s.marks = s.marks[:len(s.marks)-1]
		}
		f := &s.stack[len(s.stack)-1]
		advanced := false
		for f.altNext < f.altEnd {
			id := s.alts[f.altNext]
			f.altNext++
			if s.remember(h, id) {
				state, advanced = id, true
				break
			}
		}
		if advanced {
			cur = s.next[s.head()]
			continue
		}
		k := f.op
		known := !s.hist[s.ops[k]].Unknown
		state = f.prev
		if f.pooled {
			// The pooled operation was the configuration's last candidate.
			s.alts = s.alts[:f.altLo]
			s.stack = s.stack[:len(s.stack)-1]
			s.poolNext--
			goto backtrack
		}
		greedy := f.greedy
		s.first, s.top = f.first, f.top
		s.alts = s.alts[:f.altLo]
		s.stack = s.stack[:len(s.stack)-1]
		s.unlift(k, known)
		s.bits[k>>6] &^= 1 << (k & 63)
		h ^= s.zob[k]
		if known {
			left++
		} else {
			s.spend(k) // every next state failed, without effect first
		}
		if greedy {
			goto backtrack
		}
		cur = s.next[2*k]
	}
}

// release gives back what a search holds: its tables' charge to the
// budget, and the states its scratch space still refers to (clearing it
// at every step would cost a write barrier per step while the collector
// runs).
func (s *searcher[S, I, O]) release() {
	s.b.charge(-s.charged)
	s.charged = 0
	clear(s.buf[:cap(s.buf)])
}

// drop ends a search that was paused (see searcher.pausable) and will not
// be resumed.
func (s *searcher[S, I, O]) drop() {
	if s.paused.valid {
		s.paused.valid = false
		s.release()
	}
}

// pausedRun is where a paused run stopped, for the next run to go on.
type pausedRun struct {
	valid bool
	state uint32
	h     uint64
	left  int
	cur   int32
	tick  uint32
}

// capped reports whether a search with filled.stepCap has run out of its
// steps, or of the bytes that go with them, or filled.over says it is
// over its budget: a search whose memo holds
// whole linearized sets (an unknown operation left pending early pins the
// window) copies kilobytes per configuration on a long history, and is
// then slower than the searches that follow it.
func (s *searcher[S, I, O]) capped(tick uint32) bool {
	c := s.m.stepCap
	if c > 0 && (int(tick) > c*len(s.ops)+capSlack || s.charged > int64(c*len(s.ops))*capBytes+1<<20) {
		return true
	}
	return s.m.over != nil && s.m.over(tick)
}

// capBytes is the bytes of tables a capped search may hold per step it
// may take.
const capBytes = 256

// try linearizes candidate k in the current configuration if that reaches
// a configuration not explored yet, pushing a frame; it reports whether it
// did. The caller lifts k's events.
//
// An unknown operation's first next state is its state unchanged: lifting
// it without effect, which settles "never took effect" at once and takes
// it out of every later scan. That step is never needed for soundness: an
// unknown operation left pending to the end is one that never took effect
// (the search succeeds once every known operation is linearized), so try
// may skip it whenever trying it is likely wasted. Once it has led nowhere
// from a configuration C, it is skipped
//   - below C: from a configuration D reached from C with k still pending,
//     D with k lifted without effect is reachable from C with k lifted
//     without effect (an unknown operation has no return, so lifting it
//     changes no other operation's candidacy), and what is reachable from
//     a configuration without a linearization has none: the step could
//     only find explored configurations;
//   - and below C's siblings (the configurations the search reaches from
//     C's parent by other operations), where it mostly fails again: on
//     the Jepsen etcd logs this halves the configurations explored. Below
//     C's grandparent it is tried again: keeping k pending over a wider
//     scope makes every later scan try k's effects, which on lease-lock
//     histories with many timeouts costs twenty times more than it saves.
//
// (Measured with BenchmarkEtcd and BenchmarkLock100k; see spend.)
func (s *searcher[S, I, O]) try(k int32, state *uint32, h *uint64) bool {
	r := s.reads[k]
	if r == 0 {
		r = s.readOf(k)
	}
	if r > 1 && r-2 != uint64(s.states.hashOf(*state)) {
		return false // a read of another state (Model.ReadHash)
	}
	next := s.step(*state, k)
	retire := false
	if s.m.superset && s.hist[s.ops[k]].Unknown && len(next) == 1 && next[0] == *state {
		// No member of the set can take its effect here: placing it
		// would only give up the chance to place it later, and leaving it
		// pending is the same set with more options. Unless it can never
		// take effect again: then it is lifted for good, greedily (the
		// configuration after is the one before).
		if retire = s.m.retired != nil && s.m.retired(s.states.state(*state), &s.hist[s.ops[k]]); !retire {
			return false
		}
	}
	unknown := s.hist[s.ops[k]].Unknown && !s.m.superset
	if unknown && s.spent[k] != none {
		next = next[1:]
	}
	if len(next) == 0 {
		return false
	}
	nh := *h ^ s.zob[k]
	first, top := s.first, s.top
	s.bits[k>>6] |= 1 << (k & 63)
	if k == s.first {
		s.advanceFirst()
	}
	s.top = max(s.top, k>>6+1)
	for i, id := range next {
		if !s.remember(nh, id) {
			if unknown && id == *state {
				s.spend(k) // explored already without effect: it led nowhere
			}
			continue
		}
		greedy := retire || s.m.ReadOnly != nil && len(next) == 1 && next[0] == *state &&
			!unknown && s.m.ReadOnly(&s.hist[s.ops[k]])
		lo := int32(len(s.alts))
		s.alts = append(s.alts, next...)
		s.stack = append(s.stack, frame{op: k, prev: *state, altLo: lo, altNext: lo + int32(i+1), altEnd: int32(len(s.alts)), greedy: greedy, first: first, top: top})
		*state, *h = id, nh
		return true
	}
	s.bits[k>>6] &^= 1 << (k & 63)
	s.first, s.top = first, top
	return false
}

// readOf fills in reads[k] from Model.ReadHash and returns it.
func (s *searcher[S, I, O]) readOf(k int32) uint64 {
	r := uint64(1)
	if op := &s.hist[s.ops[k]]; s.m.ReadHash != nil && !op.Unknown {
		if h, ok := s.m.ReadHash(op); ok {
			r = uint64(stateHash(h)) + 2
		}
	}
	s.reads[k] = r
	return r
}

// spend records that unknown operation k led nowhere without effect from
// the current configuration: try skips that step until the search
// backtracks above the current configuration's parent (see try). A mark
// already in place has a wider scope and stays.
func (s *searcher[S, I, O]) spend(k int32) {
	if s.spent[k] != none {
		return
	}
	d := int32(max(0, len(s.stack)-1))
	s.spent[k] = d
	// Keep marks ordered by depth: one made below may still be in place.
	i := len(s.marks)
	for i > 0 && s.spent[s.marks[i-1]] > d {
		i--
	}
	s.marks = slices.Insert(s.marks, i, k)
}

// tryPool places the next pooled operation, if there is one and it is a
// candidate (called no later than the return at cur, the first in the
// list, or with every return gone), it has an effect, and the
// configuration it reaches is new; it reports whether it did, pushing a
// frame. It is the last candidate of a configuration: popping its frame
// backtracks further.
//
// Placing the pool in call order only is complete: a linearization that
// places a later one (b) while an earlier one (a) is pending is matched by
// one that places a there, whose state dominates, and b where a was (b is
// a candidate there, since it was one at a's earlier place and had no
// return); every state after dominates the one it replaces (see
// filled.pooled).
func (s *searcher[S, I, O]) tryPool(cur int32, state *uint32, h uint64) bool {
	if int(s.poolNext) == len(s.pool) {
		return false
	}
	k := s.pool[s.poolNext]
	if cur != none && s.hist[s.ops[k]].Call > s.hist[s.ops[cur>>1]].Return {
		return false // called after an operation still to linearize returned
	}
	next := s.step(*state, k)
	if len(next) != 1 || next[0] == *state {
		return false // no effect here: it stays next
	}
	id := next[0]
	s.poolNext++
	if !s.remember(h, id) {
		s.poolNext--
		return false
	}
	lo := int32(len(s.alts))
	s.alts = append(s.alts, id)
	s.stack = append(s.stack, frame{op: k, prev: *state, altLo: lo, altNext: lo + 1, altEnd: lo + 1, first: s.first, top: s.top, pooled: true})
	*state = id
	return true
}

// pairID is the id the memo knows a state id by: itself, or with a pool
// the id of (state id, poolNext).
func (s *searcher[S, I, O]) pairID(id uint32) uint32 {
	if s.pairs == nil {
		return id
	}
	key := uint64(id) | uint64(s.poolNext)<<32
	p, ok := s.pairs[key]
	if !ok {
		p = uint32(len(s.pairs))
		s.pairs[key] = p
	}
	return p
}

// advanceFirst moves first past the operations linearized from it on.
func (s *searcher[S, I, O]) advanceFirst() {
	f := s.first
	for {
		// The padding words are zero: the scan ends by len(ops).
		if rest := ^s.bits[f>>6] >> (f & 63); rest != 0 {
			s.first = f + int32(bits.TrailingZeros64(rest))
			return
		}
		f = (f>>6 + 1) << 6
	}
}

// remember records the configuration of the linearized set (whose Zobrist
// hash is h) and state id, and reports whether it is new. With a window, a
// set goes to memo as the window of words from first's word on when every
// set bit after them is within it, and whole to wide otherwise: which table
// and form a set takes depends only on the set, so each configuration has
// one place and form.
func (s *searcher[S, I, O]) remember(h uint64, id uint32) bool {
	id = s.pairID(id)
	key := h ^ mix(uint64(id)+1)
	if s.win == 0 {
		return s.memo.insert(key, s.bits[:s.words], uint64(id))
	}
	base := s.first >> 6
	if s.top-base <= int32(s.win) {
		return s.memo.insert(key, s.bits[base:int(base)+s.win], uint64(id)|uint64(base)<<32)
	}
	return s.wide.insert(key, s.bits[:s.words], uint64(id))
}

// zobrist is the random word of operation k in the incremental hash of the
// linearized set (splitmix64 of k: fixed, so runs repeat exactly).
func zobrist(k uint64) uint64 {
	z := k*0x9e3779b97f4a7c15 + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// mix spreads a model's state hash (which may be small or zero) over 64 bits.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
