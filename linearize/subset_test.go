package linearize

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// checkOn runs the generic search of m as Check does (decideSplitThenSets
// and shrinking) with capSplit: 0 runs the search of m's Step alone,
// uncapped, within limit (0: none).
func checkOn[S, I, O any](tb testing.TB, m Model[S, I, O], h []Operation[I, O], capSplit int, limit time.Duration) Result {
	tb.Helper()
	fm, ctx, b, done := setUp(tb, m, limit)
	defer done()
	return checkGeneric(context.Background(), ctx, &fm, h, Options{Workers: 1}, b, capSplit)
}

// setUp fills in m (without its decider) and returns a ctx and budget
// limited to limit (0: none), and what releases them.
func setUp[S, I, O any](tb testing.TB, m Model[S, I, O], limit time.Duration) (filled[S, I, O], context.Context, *budget, func()) {
	tb.Helper()
	fm, err := fill(genericOnly(m))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if limit > 0 {
		ctx, cancel = context.WithTimeout(ctx, limit)
	}
	b := newBudget(ctx, DefaultMaxMemory, 0)
	return fm, ctx, b, func() { b.stop(); cancel() }
}

// checkSets decides h by the search on sets alone, within limit: each
// partition searched on sets, an Ok witness picked from the sets, an
// Illegal partition shrunk on sets.
func checkSets[S, I, O any](tb testing.TB, m Model[S, I, O], h []Operation[I, O], limit time.Duration) Result {
	tb.Helper()
	return searchSetsAlone(tb, m, h, limit, func(fm *filled[S, I, O], _ []Operation[I, O]) *subset[S, I, O] { return newSubset(fm) }, true)
}

// searchSetsAlone decides h by a search on sets alone (one of mk's, per
// partition), within limit, until a partition is not Ok; an Illegal one
// is shrunk with the same search. With witness, an Ok partition gets a
// witness picked from the sets (the relaxed search's Ok has none).
func searchSetsAlone[S, I, O any](tb testing.TB, m Model[S, I, O], h []Operation[I, O], limit time.Duration,
	mk func(*filled[S, I, O], []Operation[I, O]) *subset[S, I, O], witness bool) Result {
	tb.Helper()
	fm, ctx, b, done := setUp(tb, m, limit)
	defer done()
	res := Result{Partitions: partition(&fm, h)}
	var u *subset[S, I, O]
	for i := range res.Partitions {
		p := &res.Partitions[i]
		u = mk(&fm, h)
		*p = decideSets(u, h, Partition{Key: p.Key, Ops: p.Ops}, b)
		if p.Verdict == Ok && witness {
			w, ok := u.witness(h, p.Linearization, p.trail)
			if !ok {
				tb.Fatalf("partition %d: no witness from the sets' trail", i)
			}
			p.Linearization = w
		}
		p.trail = nil
		if p.Verdict != Ok {
			break
		}
	}
	verdictOf(ctx, &res, b)
	if res.Verdict == Illegal {
		res.Counterexample, res.Minimal, _ = shrinkWithin(context.Background(), &u.set, h,
			res.Partitions[res.FailingPartition].Ops, res.Blocker, Options{})
	}
	return res
}

// setsAgree checks h by the search on sets alone, the search of m's Step
// alone, Check (the two together), porcupine and, when small, the
// brute-force reference: no two verdicts may disagree, and Check must
// decide. Every Ok witness is replayed on m; every Illegal
// counterexample must hold its blocker and be Illegal for the search of
// m's Step. It returns Check's verdict and whether the sets, the split
// search and porcupine each decided within limit.
func setsAgree[S, I, O any](t *testing.T, m Model[S, I, O], h []Operation[I, O], limit time.Duration) (Verdict, [3]bool) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		var b []byte
		_ = EncodeHistory(&byteWriter{&b}, h)
		t.Fatalf(format+" on\n%s", append(args, b)...)
	}
	res, err := Check(context.Background(), genericOnly(m), h, Options{Workers: 1, TimeLimit: decideLimit})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict == Unknown {
		fail("Check gave up")
	}
	sets := checkSets(t, m, h, limit)
	split := checkOn(t, m, h, 0, limit)
	pm, ph := toPorcupine(m, h)
	pc := Unknown
	if v := porcupine.CheckOperationsTimeout(pm, ph, limit); v != porcupine.Unknown {
		pc = pcVerdict(v == porcupine.Ok)
	}
	for name, v := range map[string]Verdict{"the search on sets": sets.Verdict, "the split search": split.Verdict, "porcupine": pc} {
		if v != Unknown && v != res.Verdict {
			fail("Check says %v, %s %v", res.Verdict, name, v)
		}
	}
	if len(h) <= 7 {
		if ref := pcVerdict(bruteCheck(m, h)); ref != res.Verdict {
			fail("Check says %v, the reference %v", res.Verdict, ref)
		}
	}
	for _, r := range []*Result{&res, &sets} {
		switch r.Verdict {
		case Ok:
			verifyLinearization(t, m, h, r)
		case Illegal:
			if !slices.Contains(r.Counterexample, r.Blocker) {
				fail("blocker %d not in the counterexample %v", r.Blocker, r.Counterexample)
			}
			sub := make([]Operation[I, O], 0, len(r.Counterexample))
			for j, i := range r.Counterexample {
				op := h[i]
				op.ID = j
				sub = append(sub, op)
			}
			if v := checkOn(t, m, sub, 0, 0).Verdict; v != Illegal {
				fail("the counterexample %v is %v for the split search", r.Counterexample, v)
			}
		}
	}
	return res.Verdict, [3]bool{sets.Verdict != Unknown, split.Verdict != Unknown, pc != Unknown}
}

// TestSetsDifferential compares Check's generic search (the search of the
// model's Step, capped on partitions with unknown outcomes, then
// alternating with the search on sets) with each of the two searches
// alone, porcupine and the brute-force reference, on small random
// histories of every model of the package with unknown outcomes and on
// short simulated lease and fenced-register histories with every bug
// class: no disagreement
// is allowed (LOCKPROOF_DEEP: ten times as many, 2 s for each oracle).
func TestSetsDifferential(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x5e75))
	n := 300
	limit := time.Second / 4
	if deep() {
		n, limit = 3000, 2*time.Second
	}
	lease := smallLeaseModel(t)
	sim, err := NewLeaseModel(6*time.Millisecond, time.Millisecond/2)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string][3]int{}
	var undecided [3]int // by the sets, the split search, porcupine
	tally := func(model string, v Verdict, decided [3]bool) {
		c := count[model]
		c[v]++
		count[model] = c
		for i, d := range decided {
			if !d {
				undecided[i]++
			}
		}
	}
	for range n {
		v, d := setsAgree(t, NewRegisterModel(0), genRegister(rng), limit)
		tally("register", v, d)
		v, d = setsAgree(t, NewFencedRegisterModel(0), genFenced(rng), limit)
		tally("fenced", v, d)
		v, d = setsAgree(t, NewKVModel(), genKV(rng), limit)
		tally("kv", v, d)
		v, d = setsAgree(t, lease, genLease(rng), limit)
		tally("lease", v, d)
		v, d = setsAgree(t, sim, genLeaseSmallSim(rng), limit)
		tally("lease-sim", v, d)
		fm, fh := genFenceSmallSim(rng)
		v, d = setsAgree(t, fm, fh, limit)
		tally("fenced-sim", v, d)
	}
	for _, model := range []string{"register", "fenced", "kv", "lease", "lease-sim", "fenced-sim"} {
		c := count[model]
		t.Logf("%s: %d histories, %d Ok, %d Illegal", model, n, c[Ok], c[Illegal])
		if c[Ok] < n/20 || c[Illegal] < n/20 {
			t.Errorf("%s: verdicts too one-sided to compare (%d Ok, %d Illegal)", model, c[Ok], c[Illegal])
		}
	}
	t.Logf("undecided within %v: %d by the search on sets alone, %d by the split search alone, %d by porcupine",
		limit, undecided[0], undecided[1], undecided[2])
}

// TestSetsDecideManyUnknownAcquires checks that the generic search (the
// lease model without its decider) decides correct single-lock histories
// with many unknown acquires, which the search of the model's own Step
// alone left undecided for seconds: 3 clients, 100 operations, 35%
// unknown (seeds of TestLeaseDecidedTable's third row).
func TestSetsDecideManyUnknownAcquires(t *testing.T) {
	m := genericOnly(leaseModel(t))
	for _, i := range []uint64{144, 150, 157, 173} {
		h := leaseSimHistory(leaseSim{seed: 3<<32 | i, ops: 100, clients: 3, keys: 1, unknown: 0.35,
			ttl: testTTL, tol: time.Millisecond})
		res, err := Check(context.Background(), m, h, Options{TimeLimit: decideLimit})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != Ok {
			t.Fatalf("seed %d: %v (%v) after %v", i, res.Verdict, res.Cause, res.Elapsed)
		}
		verifyLinearization(t, m, h, &res)
		split := checkOn(t, m, h, 0, 100*time.Millisecond)
		t.Logf("seed %d: Ok in %v; the search of the model's Step alone: %v after 100ms", i, res.Elapsed, split.Verdict)
	}
}

// TestSetsAlternateWithSplit checks a history the search on sets alone
// takes minutes to prove Illegal (3.5 min once: a token regression among
// 11 unknown acquires of distinct owners, every placement of which is a
// set of its own) and the split search 40 ms: Check, which alternates the
// two, must decide it within its limit.
func TestSetsAlternateWithSplit(t *testing.T) {
	h := readLeaseHistory(t, "token-regress-30.json")
	m, err := NewLeaseModel(6*time.Millisecond, time.Millisecond/2)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Check(context.Background(), genericOnly(m), h, Options{TimeLimit: decideLimit, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Illegal {
		t.Fatalf("verdict %v (%v) after %v, want Illegal", res.Verdict, res.Cause, res.Elapsed)
	}
	stillIllegal(t, m, h, res)
	sets := checkSets(t, m, h, 100*time.Millisecond)
	t.Logf("Illegal in %v; the search on sets alone: %v after 100ms", res.Elapsed, sets.Verdict)
}

// The turns of the two searches are counted in steps: checked again,
// with the machine busy or not, a history that needs both searches gives
// the same counterexample, and a correct one with many unknown acquires
// the same witness.
func TestAlternateRepeats(t *testing.T) {
	bad := readLeaseHistory(t, "token-regress-30.json")
	m, err := NewLeaseModel(6*time.Millisecond, time.Millisecond/2)
	if err != nil {
		t.Fatal(err)
	}
	good := leaseSimHistory(leaseSim{seed: 7, ops: 100, clients: 3, keys: 1, unknown: 0.35, ttl: 100 * time.Millisecond, tol: time.Millisecond})
	gm, err := NewLeaseModel(100*time.Millisecond, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    Model[LeaseState, LeaseInput, LeaseOutput]
		h    []Operation[LeaseInput, LeaseOutput]
	}{{"token regression", m, bad}, {"correct, 35% unknown", gm, good}} {
		var first Result
		for i := range 3 {
			res, err := Check(context.Background(), genericOnly(c.m), c.h, Options{TimeLimit: decideLimit, Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = res
				continue
			}
			if res.Verdict != first.Verdict || !slices.Equal(res.Counterexample, first.Counterexample) {
				t.Fatalf("%s: check %d gave %v %v, the first %v %v", c.name, i, res.Verdict, res.Counterexample, first.Verdict, first.Counterexample)
			}
			for p := range res.Partitions {
				if !slices.Equal(res.Partitions[p].Linearization, first.Partitions[p].Linearization) {
					t.Fatalf("%s: check %d's witness of partition %d differs from the first's", c.name, i, p)
				}
			}
		}
		t.Logf("%s: %v, counterexample %v", c.name, first.Verdict, first.Counterexample)
	}
}
