package linearize

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Verdict is the answer of a check.
type Verdict int

const (
	// Unknown: the budget (ctx, Options.TimeLimit, Options.MaxMemory) ran out
	// before an answer; Result.Cause says which. It is not "probably fine".
	Unknown Verdict = iota
	// Ok: the history is linearizable; Result.Linearization gives a witness.
	Ok
	// Illegal: the history is not linearizable; Result.Counterexample holds
	// a small sub-history that is not linearizable either.
	Illegal
)

// String returns "Ok", "Illegal" or "Unknown".
func (v Verdict) String() string {
	switch v {
	case Ok:
		return "Ok"
	case Illegal:
		return "Illegal"
	default:
		return "Unknown"
	}
}

// DefaultMaxMemory is Options.MaxMemory when it is zero: 4 GiB of memo
// tables. A hard history (say, an Illegal partition searched on one worker,
// with no other partition to fail first) otherwise grows them until the
// process is killed. Set a lower cap on smaller machines.
const DefaultMaxMemory = 4 << 30

// Options bound and tune a check. The zero value is ready: no time limit
// but ctx, DefaultMaxMemory, GOMAXPROCS workers, counterexamples minimized.
type Options struct {
	// TimeLimit bounds the decision; zero means only ctx bounds it. When
	// it passes the verdict is Unknown with Cause ErrTimeLimit. Shrinking
	// the counterexample of an Illegal verdict has a budget of its own
	// (ShrinkTimeLimit).
	TimeLimit time.Duration
	// MaxMemory caps the bytes the searches' memo tables hold at once (not
	// what states point to, which may be as much again); reaching it ends
	// the check Unknown with Cause ErrMemoryLimit. Zero means
	// DefaultMaxMemory; math.MaxInt64 lifts the cap.
	MaxMemory int64
	// MaxSteps bounds the steps of search, counted in blocks of a few
	// hundred, for the decision and again for shrinking; zero means no
	// bound. Spending them ends the check with Unknown and Cause
	// ErrStepLimit. With Workers 1 a step bound, unlike TimeLimit, gives
	// one history the same Result on any machine under any load.
	MaxSteps int64
	// Workers is how many partitions are searched at once. Zero means
	// GOMAXPROCS.
	Workers int
	// NoMinimize skips shrinking an Illegal history: Counterexample is then
	// the whole failing partition (or, for a lease model, the operations of
	// a violation found without search). Default false (minimize).
	NoMinimize bool
	// ShrinkTimeLimit bounds the shrinking of an Illegal verdict's
	// counterexample (ctx still bounds it); zero means TimeLimit again.
	// When it passes, Counterexample is the smallest failing sub-history
	// found so far and Minimal is false.
	ShrinkTimeLimit time.Duration

	_ struct{} // keyed literals only
}

// Partition is the result for the operations that share one partition key.
type Partition struct {
	// Key is the partition key ("" without Model.Partition).
	Key string
	// Ops are the history indices of the partition's operations, by call.
	Ops []int
	// Verdict for this partition alone. A partition whose search was
	// stopped because another one failed is Unknown.
	Verdict Verdict
	// Linearization, when Verdict is Ok: history indices in linearized
	// order. Every known operation appears once; an unknown operation
	// appears iff the witness lets it take effect (absent ones never did).
	Linearization []int
	// States is the number of (linearized set, state) configurations the
	// search memoized: a measure of the work done.
	States int

	blocker int // see outcome.blocker
	trail   any // see outcome.trail
}

// Result is the outcome of Check.
type Result struct {
	// Verdict is Illegal if any partition is Illegal, Ok if all are Ok, and
	// Unknown otherwise.
	Verdict Verdict
	// Cause, for Unknown, is why the check stopped: context.Cause of ctx,
	// ErrTimeLimit or ErrMemoryLimit. Nil otherwise.
	Cause error
	// Partitions, in key order.
	Partitions []Partition
	// Counterexample, for Illegal: history indices (by call time) of a
	// non-linearizable sub-history of one failing partition. When Minimal,
	// its search stops at Blocker and removing any one operation makes it
	// linearizable or stop elsewhere (see the package doc, Semantics).
	Counterexample []int
	// Blocker, for Illegal, is the history index of the operation at which
	// the search got stuck: the search could linearize the most operations
	// before it, and no order let this one take effect before its return.
	// -1 if unknown.
	Blocker int
	// Minimal reports whether Counterexample was shrunk to minimality (as
	// above) before the budget ran out.
	Minimal bool
	// FailingPartition is the index in Partitions of the partition the
	// counterexample comes from; -1 unless Illegal.
	FailingPartition int
	// Elapsed is the wall time of the check, shrinking included.
	Elapsed time.Duration
	// ShrinkElapsed is the part of Elapsed spent shrinking the
	// counterexample (under Options.ShrinkTimeLimit).
	ShrinkElapsed time.Duration
	// Steps is the search steps the decision spent, shrinking not
	// included, as Options.MaxSteps counts them: with Workers 1, the same
	// for one history on every machine.
	Steps int64
}

// Linearization returns the witness of an Ok result: for each partition,
// the history indices in linearized order (see Partition.Linearization).
func (r *Result) Linearization() [][]int {
	if r.Verdict != Ok {
		return nil
	}
	out := make([][]int, len(r.Partitions))
	for i := range r.Partitions {
		out[i] = r.Partitions[i].Linearization
	}
	return out
}

// Check decides whether history is linearizable with respect to model.
//
// It returns an error, and no verdict, for a malformed model, history or
// options (see ErrInvalidModel, ErrInvalidHistory, ErrInvalidOptions).
// Otherwise the Result says Ok, Illegal or Unknown; Unknown only when ctx is
// done, Options.TimeLimit passes or Options.MaxMemory is reached.
// Partitions are searched in parallel on at most Options.Workers goroutines,
// all of which have ended when Check returns. When several partitions are
// Illegal, which one the counterexample comes from depends on scheduling
// unless Workers is 1.
func Check[S, I, O any](ctx context.Context, model Model[S, I, O], history []Operation[I, O], opts Options) (Result, error) {
	start := time.Now()
	if opts.TimeLimit < 0 || opts.MaxMemory < 0 || opts.MaxSteps < 0 || opts.Workers < 0 || opts.ShrinkTimeLimit < 0 {
		return Result{}, fmt.Errorf("%w: negative limit in %+v", ErrInvalidOptions, opts)
	}
	m, err := fill(model)
	if err != nil {
		return Result{}, err
	}
	if err := validateHistory(history); err != nil {
		return Result{}, err
	}
	if opts.MaxMemory == 0 {
		opts.MaxMemory = DefaultMaxMemory
	}
	parent := ctx
	if opts.TimeLimit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, opts.TimeLimit, ErrTimeLimit)
		defer cancel()
	}
	b := newBudget(ctx, opts.MaxMemory, opts.MaxSteps)
	defer b.stop()

	if model.fastUsable() {
		if res, ok := model.fast(parent, ctx, history, opts, b); ok {
			res.Elapsed, res.Steps = time.Since(start), b.steps.Load()
			return res, nil
		}
	}
	res := checkGeneric(parent, ctx, &m, history, opts, b, splitCap)
	res.Elapsed, res.Steps = time.Since(start), b.steps.Load()
	return res, nil
}

// newBudget returns a budget cancelled when ctx is done; stop releases
// its watch of ctx. A ctx that is never done (context.Background) is not
// watched.
func newBudget(ctx context.Context, maxMem, maxSteps int64) *budget {
	b := &budget{maxMem: maxMem, maxSteps: maxSteps}
	if ctx.Done() == nil {
		return b
	}
	b.unwatch = context.AfterFunc(ctx, func() { b.cancelled.Store(true) })
	if ctx.Err() != nil {
		b.cancelled.Store(true)
	}
	return b
}

// decide runs the generic search on every partition of history (parts,
// from partition, or nil to compute them); for an Illegal verdict it fills
// in Blocker and FailingPartition, and leaves Counterexample to the caller
// (nil).
func decide[S, I, O any](ctx context.Context, m *filled[S, I, O], history []Operation[I, O], parts []Partition, opts Options, b *budget) Result {
	res := Result{FailingPartition: -1, Blocker: -1, Partitions: parts}
	if parts == nil {
		res.Partitions = partition(m, history)
	}
	runPartitions(m, history, res.Partitions, b, opts.Workers)
	verdictOf(ctx, &res, b)
	return res
}

// verdictOf sets res's Verdict from its partitions' (and FailingPartition,
// Blocker and Cause with it).
func verdictOf(ctx context.Context, res *Result, b *budget) {
	res.Verdict, res.FailingPartition, res.Blocker, res.Cause = Ok, -1, -1, nil
	for i := range res.Partitions {
		switch res.Partitions[i].Verdict {
		case Illegal:
			if res.Verdict != Illegal {
				res.Verdict, res.FailingPartition = Illegal, i
			}
		case Unknown:
			if res.Verdict == Ok {
				res.Verdict = Unknown
			}
		}
	}
	switch res.Verdict {
	case Illegal:
		res.Blocker = res.Partitions[res.FailingPartition].blocker
	case Unknown:
		res.Cause = unknownCause(ctx, b)
	}
}

// shrinkWithin shrinks the failing partition ops under a budget of its
// own: Options.ShrinkTimeLimit (or, if zero, TimeLimit) from now on, within
// parent (the caller's ctx). With NoMinimize it returns ops unchanged.
func shrinkWithin[S, I, O any](parent context.Context, m *filled[S, I, O], history []Operation[I, O], ops []int, blocker int, opts Options) (cex []int, minimal bool, took time.Duration) {
	if opts.NoMinimize {
		return slices.Clone(ops), false, 0
	}
	start := time.Now()
	ctx := parent
	limit := opts.ShrinkTimeLimit
	if limit == 0 {
		limit = opts.TimeLimit
	}
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(parent, limit, ErrTimeLimit)
		defer cancel()
	}
	b := newBudget(ctx, opts.MaxMemory, opts.MaxSteps)
	defer b.stop()
	cex, minimal = shrink(m, history, ops, blocker, b)
	return cex, minimal, time.Since(start)
}

func unknownCause(ctx context.Context, b *budget) error {
	if b.memHit.Load() {
		return ErrMemoryLimit
	}
	if b.stepHit.Load() {
		return ErrStepLimit
	}
	if c := context.Cause(ctx); c != nil {
		return c
	}
	return errors.New("linearize: search stopped")
}

// partition groups the history by Model.Partition, keys in order and each
// partition's operations by call time.
func partition[S, I, O any](m *filled[S, I, O], history []Operation[I, O]) []Partition {
	if m.Partition == nil {
		return whole(history)
	}
	// Number the keys in order of appearance, count their operations, then
	// lay the partitions out in one array, each by call time.
	var (
		index map[string]int32 // once there are many keys
		keys  []string
		heads []uint64 // keyHead of each key, for the scan
		count []int
		of    = make([]int32, len(history))
	)
	const scanKeys = 16 // up to this many keys, a scan beats hashing
	for i := range history {
		k := ""
		if m.Partition != nil {
			k = m.Partition(history[i].Input)
		}
		p, ok := int32(-1), false
		if index != nil {
			p, ok = index[k]
		} else {
			kh := keyHead(k)
			for j, h := range heads {
				if h == kh && keys[j] == k {
					p, ok = int32(j), true
					break
				}
			}
		}
		if !ok {
			p = int32(len(keys))
			keys = append(keys, k)
			heads = append(heads, keyHead(k))
			count = append(count, 0)
			if index != nil {
				index[k] = p
			} else if len(keys) > scanKeys {
				index = make(map[string]int32, 2*len(keys))
				for j, k := range keys {
					index[k] = int32(j)
				}
			}
		}
		of[i] = p
		count[p]++
	}
	byKey := make([]int32, len(keys)) // partition number -> rank of its key
	for i := range byKey {
		byKey[i] = int32(i)
	}
	slices.SortFunc(byKey, func(a, b int32) int { return strings.Compare(keys[a], keys[b]) })
	start := make([]int, len(keys)) // by partition number
	parts := make([]Partition, len(keys))
	at := 0
	for _, p := range byKey {
		start[p] = at
		at += count[p]
	}
	all := make([]int, len(history))
	fill := slices.Clone(start)
	for i, p := range of {
		all[fill[p]] = i
		fill[p]++
	}
	for r, p := range byKey {
		lo, hi := start[p], start[p]+count[p]
		ops := all[lo:hi:hi]
		sortByCall(history, ops)
		parts[r] = Partition{Key: keys[p], Ops: ops}
	}
	return parts
}

// whole is partition without Model.Partition: one partition of every
// operation (none for an empty history).
func whole[I, O any](history []Operation[I, O]) []Partition {
	if len(history) == 0 {
		return []Partition{}
	}
	ops := make([]int, len(history))
	for i := range ops {
		ops[i] = i
	}
	sortByCall(history, ops)
	return []Partition{{Ops: ops}}
}

// sortByCall sorts ops (history indices) by call time, keeping the order
// of equal calls.
func sortByCall[I, O any](history []Operation[I, O], ops []int) {
	byCall := func(a, b int) int { return cmpInt64(history[a].Call, history[b].Call) }
	if !slices.IsSortedFunc(ops, byCall) {
		slices.SortStableFunc(ops, byCall)
	}
}

// keyHead packs a key's length and first bytes into a word: keys with
// different heads differ, so the scan of partition compares most keys as
// integers (the short keys of a key-value history entirely).
func keyHead(k string) uint64 {
	h := uint64(len(k)) << 56
	for i := 0; i < len(k) && i < 7; i++ {
		h |= uint64(k[i]) << (8 * i)
	}
	return h
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// runPartitions searches every partition, the largest first, on a bounded
// pool of goroutines; the first Illegal one stops the others.
//
// The calling goroutine is a worker, and starts the others only once the
// work is big enough to repay them: when one of its searches takes 1024
// steps, or its searches have memoized spawnAfter configurations. Small
// histories (a few dozen operations per key) are then checked without a
// goroutine.
func runPartitions[S, I, O any](m *filled[S, I, O], history []Operation[I, O], parts []Partition, b *budget, workers int) {
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	r := &partitionRun[S, I, O]{m: m, history: history, parts: parts, b: b, workers: min(workers, len(parts))}
	if len(parts) > 1 {
		r.order = make([]int, len(parts))
		for i := range r.order {
			r.order[i] = i
		}
		slices.SortStableFunc(r.order, func(a, b int) int { return len(parts[b].Ops) - len(parts[a].Ops) })
	}
	r.caller = getSearcher(m, history, b, &r.abort)
	if r.workers > 1 {
		r.caller.slow = r.spawn
	}
	r.work(r.caller)
	r.wg.Wait()
	putSearcher(r.caller)
}

// partitionRun is the shared state of runPartitions' workers.
type partitionRun[S, I, O any] struct {
	m       *filled[S, I, O]
	history []Operation[I, O]
	parts   []Partition
	order   []int // the partitions, largest first; nil for one
	b       *budget
	workers int
	caller  *searcher[S, I, O] // the calling goroutine's
	next    atomic.Int64       // of order
	abort   atomic.Bool        // a partition is Illegal
	wg      sync.WaitGroup
}

// work searches partitions with s until none is left or one is Illegal
// (the rest stay Unknown).
func (r *partitionRun[S, I, O]) work(s *searcher[S, I, O]) {
	configs := 0
	for {
		i := int(r.next.Add(1) - 1)
		if i >= len(r.parts) || r.abort.Load() {
			return
		}
		if r.order != nil {
			i = r.order[i]
		}
		p := &r.parts[i]
		s.reset(p.Ops)
		out := s.run()
		p.Verdict, p.Linearization, p.States, p.blocker, p.trail = out.verdict, out.order, out.states, out.blocker, out.trail
		if out.verdict == Illegal {
			r.abort.Store(true)
		}
		if configs += out.states; configs > spawnAfter && s == r.caller {
			r.spawn()
		}
	}
}

// spawn starts the other workers, once (the caller's searcher calls it).
func (r *partitionRun[S, I, O]) spawn() {
	if r.caller.slow == nil {
		return // already started, or a single worker
	}
	r.caller.slow = nil
	for range r.workers - 1 {
		r.wg.Go(func() {
			s := getSearcher(r.m, r.history, r.b, &r.abort)
			r.work(s)
			putSearcher(s)
		})
	}
}

// spawnAfter is the number of configurations the calling goroutine
// memoizes in small searches before it starts the other workers.
const spawnAfter = 4096
