package linearize

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// genericOnly returns m without its fast decider: Check then runs the
// generic search of m's own Step, the oracle of the decider.
func genericOnly[S, I, O any](m Model[S, I, O]) Model[S, I, O] {
	m.fast = nil
	return m
}

// setsOnly returns a lease model (ttl, tolerance) whose decider skips the
// capped search of the plain model and searches on sets at once, so that
// small histories test that search too.
func setsOnly(tb testing.TB, ttl, tol time.Duration) Model[LeaseState, LeaseInput, LeaseOutput] {
	tb.Helper()
	m, err := NewLeaseModel(ttl, tol)
	if err != nil {
		tb.Fatal(err)
	}
	plain := m
	plain.fast = nil
	d := newLeaseDecider(int64(ttl-tol), plain)
	d.plainCap = 0
	m.fast = d.decide
	return m
}

// genLeaseWild is a small lease history with random outputs, owners shared
// between operations and tokens from a small range: the corners a
// simulated server never produces.
func genLeaseWild(rng *rand.Rand) []Operation[LeaseInput, LeaseOutput] {
	n := 1 + rng.IntN(9)
	h := make([]Operation[LeaseInput, LeaseOutput], n)
	for i := range h {
		op := &h[i]
		c := rng.Int64N(40)
		*op = Operation[LeaseInput, LeaseOutput]{ID: i, ClientID: rng.IntN(4), Call: c, Return: c + rng.Int64N(14)}
		op.Input = LeaseInput{Lock: "L", Op: LeaseOp(1 + rng.IntN(3)), Owner: uint64(1 + rng.IntN(3))}
		if rng.IntN(6) == 0 {
			op.Input.Lock = "M"
		}
		op.Output = LeaseOutput{OK: rng.IntN(3) > 0, Token: uint64(rng.IntN(5))}
		op.Unknown = rng.IntN(4) == 0
		if rng.IntN(3) == 0 {
			op.Output.Deadline = c + rng.Int64N(14) // reported, and maybe before the TTL reckoning
		}
	}
	return h
}

// genLeaseSmallSim is a short simulated history (see leaseSim) with a TTL
// short enough for leases to expire within it, at a random unknown
// fraction and with a random bug, or none.
func genLeaseSmallSim(rng *rand.Rand) []Operation[LeaseInput, LeaseOutput] {
	g := leaseSim{seed: rng.Uint64(), ops: 4 + rng.IntN(36), clients: 1 + rng.IntN(4), keys: 1 + rng.IntN(2),
		unknown: 0.05 + 0.35*rng.Float64(), ttl: 6 * time.Millisecond, tol: time.Millisecond / 2,
		bug: leaseBug(rng.IntN(int(bugClasses)))}
	if rng.IntN(2) == 0 {
		g.bug = bugNone
	}
	h, _ := g.generate()
	return h
}

// TestLeaseDeciderDifferential compares the lease model's decider (as
// NewLeaseModel sets it up, and searching on sets alone) with the generic
// search of the same model and with porcupine, on small random histories
// with unknown outcomes: no disagreement is allowed. An Ok
// witness is replayed; an Illegal counterexample must be Illegal for the
// generic search too.
func TestLeaseDeciderDifferential(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 19))
	undecidedByOracles = 0
	n := 600
	if deep() {
		n = 10_000
	}
	wild, wildSets := smallLeaseModel(t), setsOnly(t, 10, 1)
	sim, err := NewLeaseModel(6*time.Millisecond, time.Millisecond/2)
	if err != nil {
		t.Fatal(err)
	}
	simSets := setsOnly(t, 6*time.Millisecond, time.Millisecond/2)
	var count [3]int
	for i := range n {
		m, ms, h := wild, wildSets, genLeaseWild(rng)
		if i%2 == 1 {
			m, ms, h = sim, simSets, genLeaseSmallSim(rng)
		}
		v := differLease(t, m, h, true)
		if vs := differLease(t, ms, h, false); vs != v {
			t.Fatalf("history %d: %v with the plain search first, %v on sets alone", i, v, vs)
		}
		count[v]++
	}
	t.Logf("%d histories: %d Ok, %d Illegal; %d decided by neither oracle in time", n, count[Ok], count[Illegal], undecidedByOracles)
	if count[Ok] < n/10 || count[Illegal] < n/10 {
		t.Errorf("verdicts too one-sided to compare (%d Ok, %d Illegal)", count[Ok], count[Illegal])
	}
}

// differLease checks h with m's decider and returns its verdict; with
// oracles, it compares the verdict with the generic search's and
// porcupine's. Either way an Ok witness is replayed, and an Illegal
// counterexample must hold its blocker and be Illegal for the generic
// search.
// undecidedByOracles counts the histories neither oracle of differLease
// decided within its limit.
var undecidedByOracles int

func differLease(t *testing.T, m Model[LeaseState, LeaseInput, LeaseOutput], h []Operation[LeaseInput, LeaseOutput], oracles bool) Verdict {
	t.Helper()
	ctx := context.Background()
	fast, err := Check(ctx, m, h, Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	generic, pc := Result{Verdict: Unknown}, porcupine.Unknown
	if oracles {
		// The oracles' limits: porcupine takes seconds on a few of these.
		limit := time.Second / 4
		if deep() {
			limit = 10 * time.Second
		}
		generic, err = Check(ctx, genericOnly(m), h, Options{NoMinimize: true, Workers: 1, TimeLimit: limit})
		if err != nil {
			t.Fatal(err)
		}
		pm, ph := toPorcupine(m, h)
		pc = porcupine.CheckOperationsTimeout(pm, ph, limit)
		if generic.Verdict == Unknown && pc == porcupine.Unknown {
			undecidedByOracles++
		}
	}
	fail := func(format string, args ...any) {
		t.Helper()
		var b []byte
		_ = EncodeHistory(&byteWriter{&b}, h)
		t.Fatalf(format+" on\n%s", append(args, b)...)
	}
	if fast.Verdict == Unknown {
		fail("the decider gave up")
	}
	if generic.Verdict != Unknown && generic.Verdict != fast.Verdict {
		fail("decider %v, generic search %v", fast.Verdict, generic.Verdict)
	}
	if pc != porcupine.Unknown && pcVerdict(pc == porcupine.Ok) != fast.Verdict {
		fail("decider %v, porcupine %v", fast.Verdict, pc)
	}
	switch fast.Verdict {
	case Ok:
		verifyLinearization(t, m, h, &fast)
	case Illegal:
		if !slices.Contains(fast.Counterexample, fast.Blocker) {
			fail("blocker %d not in the counterexample %v", fast.Blocker, fast.Counterexample)
		}
		sub := make([]Operation[LeaseInput, LeaseOutput], 0, len(fast.Counterexample))
		for j, i := range fast.Counterexample {
			op := h[i]
			op.ID = j
			sub = append(sub, op)
		}
		cres, err := Check(ctx, genericOnly(m), sub, Options{NoMinimize: true, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		if cres.Verdict != Illegal {
			fail("the counterexample %v is %v for the generic search", fast.Counterexample, cres.Verdict)
		}
	}
	return fast.Verdict
}

// TestLeaseEvident checks each violation the decider finds without search
// on a known-bad history (verdict, counterexample, blocker), and a
// known-good near miss of each, which the decider must not reject.
func TestLeaseEvident(t *testing.T) {
	m := leaseModel(t) // TTL 100 ms, tolerance 1 ms: a lease lives 99 ms
	rel := func(id, client int, owner uint64, call, ret int64, ok bool) lop {
		return leaseCall(id, client, Release, owner, call, ret, ok)
	}
	unknown := func(op lop) lop { op.Unknown = true; return op }
	cases := []struct {
		name    string
		h       []lop
		want    Verdict
		cex     []int // IDs, for Illegal
		blocker int   // ID, for Illegal
	}{
		{"refused acquire", []lop{acquire(0, 0, 1, 0, 1, 1), acquire(1, 1, 2, 2, 3, 0)}, Ok, nil, 0}, // token 0: refused
		{"granted token zero", []lop{{ID: 0, Call: 0, Return: ms(1), Input: LeaseInput{Lock: "L", Op: Acquire, Owner: 1}, Output: LeaseOutput{OK: true}}}, Illegal, []int{0}, 0},
		{"phantom release", []lop{acquire(0, 0, 1, 0, 1, 1), rel(1, 1, 9, 2, 3, true)}, Illegal, []int{1}, 1},
		{"release of an unknown acquire's owner", []lop{unknown(acquire(0, 0, 9, 0, 1, 0)), rel(1, 1, 9, 2, 3, true)}, Ok, nil, 0},
		{"token regression", []lop{acquire(0, 0, 1, 0, 1, 5), rel(1, 0, 1, 2, 3, true), acquire(2, 1, 2, 4, 5, 5)}, Illegal, []int{0, 2}, 2},
		{"tokens of overlapping grants", []lop{acquire(0, 0, 1, 0, 10, 5), acquire(1, 1, 2, 1, 3, 4), rel(2, 1, 2, 4, 6, true)}, Ok, nil, 0},
		{"double grant", []lop{acquire(0, 0, 1, 0, 1, 1), acquire(1, 1, 2, 2, 50, 2)}, Illegal, []int{0, 1}, 1},
		{"second grant after the lease may expire", []lop{acquire(0, 0, 1, 0, 1, 1), acquire(1, 1, 2, 2, 99, 2)}, Ok, nil, 0},
		{"second grant after an unknown release", []lop{acquire(0, 0, 1, 0, 1, 1), unknown(rel(1, 0, 1, 30, 31, false)), acquire(2, 1, 2, 2, 50, 2)}, Ok, nil, 0},
		{"second grant before a release is called", []lop{acquire(0, 0, 1, 0, 1, 1), acquire(1, 1, 2, 2, 50, 2), rel(2, 0, 1, 51, 52, true)}, Illegal, []int{0, 1}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := check(t, m, c.h)
			if res.Verdict != c.want {
				t.Fatalf("verdict %v, want %v", res.Verdict, c.want)
			}
			if g := check(t, genericOnly(m), c.h); g.Verdict != c.want {
				t.Fatalf("the generic search says %v, want %v", g.Verdict, c.want)
			}
			if c.want == Ok {
				verifyLinearization(t, m, c.h, &res)
				return
			}
			if got := ids(c.h, res.Counterexample); !slices.Equal(got, c.cex) || !res.Minimal {
				t.Errorf("counterexample %v (minimal %v), want %v", got, res.Minimal, c.cex)
			}
			if c.h[res.Blocker].ID != c.blocker {
				t.Errorf("blocker %d, want %d", c.h[res.Blocker].ID, c.blocker)
			}
		})
	}
}

// TestLeaseDeciderFallsBack checks that a model whose Step was replaced is
// searched with the new Step, not decided by the lease decider.
func TestLeaseDeciderFallsBack(t *testing.T) {
	m := leaseModel(t)
	if !m.fastUsable() {
		t.Fatal("NewLeaseModel's model has no usable decider")
	}
	// A Step that accepts nothing: every history with a known operation
	// is Illegal for it, while the lease decider would say Ok.
	m.Step = func(dst []LeaseState, _ LeaseState, _ *Operation[LeaseInput, LeaseOutput]) []LeaseState { return dst }
	if m.fastUsable() {
		t.Fatal("the decider is still used after Step was replaced")
	}
	h := []lop{acquire(0, 0, 1, 0, 1, 1)}
	if res := check(t, m, h); res.Verdict != Illegal {
		t.Fatalf("verdict %v, want Illegal from the replaced Step", res.Verdict)
	}
}

// TestLeaseSimVerdicts checks leaseSim's histories against their verdicts
// by construction, for every bug class, at several unknown fractions,
// client and key counts, up to the generator's extremes.
func TestLeaseSimVerdicts(t *testing.T) {
	m := leaseModel(t)
	n := 12
	if deep() {
		n = 200
	}
	for bug := range bugClasses {
		gens := []leaseSim{}
		for i := range n {
			gens = append(gens, leaseSim{seed: uint64(i), ops: 50 + 25*(i%5), clients: 1 + i%8, keys: 1 + i%3,
				unknown: []float64{0.05, 0.2, 0.3, 0.4}[i%4], ttl: testTTL, tol: time.Millisecond, bug: bug})
		}
		// The generator's extremes: 8 clients on 100 locks and on one, 5%
		// and 40% unknown, 5,000 calls (LOCKPROOF_DEEP: 100,000).
		for _, keys := range []int{100, 1} {
			for _, u := range []float64{0.05, 0.4} {
				ops := 5000
				if deep() {
					ops = 100_000
				}
				gens = append(gens, leaseSim{seed: 1 << 20, ops: ops, clients: 8, keys: keys, unknown: u,
					ttl: testTTL, tol: time.Millisecond, bug: bug})
			}
		}
		for i, g := range gens {
			if bug != bugNone && g.clients == 1 && bug == bugDoubleGrant {
				g.clients = 2
			}
			h := leaseSimHistory(g)
			res, err := Check(context.Background(), m, h, Options{TimeLimit: decideLimit})
			if err != nil {
				t.Fatal(err)
			}
			want := Ok
			if bug != bugNone {
				want = Illegal
			}
			if res.Verdict != want {
				t.Fatalf("%v, history %d (%+v): verdict %v, want %v", bug, i, g, res.Verdict, want)
			}
			if want == Ok {
				verifyLinearization(t, m, h, &res)
			} else if !res.Minimal || len(res.Counterexample) > 4 {
				t.Errorf("%v, history %d (%+v): counterexample of %d operations (minimal %v)", bug, i, g, len(res.Counterexample), res.Minimal)
			}
			if g.ops > 1000 {
				t.Logf("%+v: %d operations, %v in %v", g, len(h), res.Verdict, res.Elapsed)
			}
		}
	}
}

// TestLeaseSetsPoolAndRetire checks, on the search on sets alone and on
// the decider as NewLeaseModel sets it up, the two shortcuts the search
// on sets takes with unknown operations: unknown acquires of owners no
// release names are placed in call order, each only where it is a
// candidate (called before every return still to linearize), and an
// unknown release is settled as never taken effect only once its owner
// can never hold the lock again. Each bad history has a twin that differs
// in one time or token and is linearizable; the generic search must agree.
func TestLeaseSetsPoolAndRetire(t *testing.T) {
	unknown := func(op lop) lop { op.Unknown, op.Output = true, LeaseOutput{}; return op }
	cases := []struct {
		name string
		h    []lop
		want Verdict
	}{
		// A refused acquire needs a holder; the only candidate is an
		// unknown acquire called after the refusal returned.
		{"refusal before the only possible holder was called", []lop{
			acquire(0, 0, 1, 0, 1, 0),
			unknown(acquire(1, 1, 2, 5, 6, 0)),
		}, Illegal},
		{"refusal once the possible holder was called", []lop{
			acquire(0, 0, 1, 5, 6, 0),
			unknown(acquire(1, 1, 2, 5, 6, 0)),
		}, Ok},
		// Two unknown acquires, the second called after a refusal that
		// only the first can explain, and a grant after both that needs
		// the first one's lease to have expired: only the first of the
		// pool can serve, twice over.
		{"pool in call order, the first expiring in time", []lop{
			unknown(acquire(0, 0, 7, 0, 1, 0)),
			acquire(1, 1, 8, 2, 3, 0),
			unknown(acquire(2, 2, 9, 50, 51, 0)),
			acquire(3, 1, 10, 100, 101, 2),
		}, Ok},
		{"pool in call order, the first not expiring in time", []lop{
			unknown(acquire(0, 0, 7, 0, 1, 0)),
			acquire(1, 1, 8, 2, 3, 0),
			unknown(acquire(2, 2, 9, 50, 51, 0)),
			acquire(3, 1, 10, 97, 98, 2),
		}, Illegal},
		// An unknown release called before its owner's grant may still
		// free the lock after that grant: a second grant needs it.
		{"release called before its owner's grant frees it", []lop{
			unknown(leaseCall(0, 0, Release, 1, 0, 1, false)),
			acquire(1, 0, 1, 5, 6, 1),
			acquire(2, 1, 2, 10, 11, 2),
		}, Ok},
		{"release of an owner whose grant is over", []lop{
			acquire(0, 0, 1, 0, 1, 1),
			leaseCall(1, 0, Release, 1, 2, 3, true),
			unknown(leaseCall(2, 0, Release, 1, 4, 5, false)),
			acquire(3, 1, 2, 6, 7, 2),
			acquire(4, 2, 3, 10, 11, 3),
		}, Illegal},
		{"unknown renewal changes nothing", []lop{
			acquire(0, 0, 1, 0, 1, 1),
			unknown(leaseCall(1, 0, Renew, 1, 2, 3, false)),
			acquire(2, 1, 2, 100, 101, 2),
		}, Ok},
	}
	plain := genericOnly(leaseModel(t))
	d := newLeaseDecider(int64(testTTL-time.Millisecond), plain)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The search on sets on its own: the decider would otherwise
			// cover a wrong Ok of it (its witness fails to replay) with
			// the generic search.
			r := d.run(c.h)
			b := newBudget(context.Background(), DefaultMaxMemory, 0)
			defer b.stop()
			res := decide(context.Background(), &r.sets, c.h, nil, Options{Workers: 1}, b)
			if res.Verdict != c.want {
				t.Fatalf("the search on sets says %v, want %v", res.Verdict, c.want)
			}
			if res.Verdict == Ok {
				p := &res.Partitions[0]
				if _, ok := r.witness(c.h, p.Linearization, p.trail); !ok {
					t.Fatalf("the witness of the search on sets does not replay: %v", p.Linearization)
				}
			}
			for _, m := range []Model[LeaseState, LeaseInput, LeaseOutput]{leaseModel(t), plain} {
				checkWant(t, m, c.h, c.want)
			}
		})
	}
}

// TestLeaseSetsHardCorrect checks histories the search on sets used to
// leave undecided: three correct single-lock histories of
// TestLeaseDecidedTable's third row (3 clients, 100 operations, 35%
// unknown; over 2 s each before unknown operations were placed only where
// they can take effect) and, under LOCKPROOF_DEEP, one lock under 8
// clients for 100,000 operations at 5%, 10% and 20% unknown (the memory
// limit before unknown acquires were placed in call order). Each must be
// Ok, with a witness that replays, well within its limit.
func TestLeaseSetsHardCorrect(t *testing.T) {
	m := leaseModel(t)
	gens := []leaseSim{}
	for _, i := range []uint64{141, 233, 260} {
		gens = append(gens, leaseSim{seed: 3<<32 | i, ops: 100, clients: 3, keys: 1, unknown: 0.35})
	}
	if deep() {
		for _, u := range []float64{0.05, 0.1, 0.2} {
			gens = append(gens, leaseSim{seed: 100_000, ops: 100_000, clients: 8, keys: 1, unknown: u})
		}
	}
	for _, g := range gens {
		g.ttl, g.tol = testTTL, time.Millisecond
		h := leaseSimHistory(g)
		limit := 2 * time.Second
		if g.ops > 1000 {
			limit = 30 * time.Second
		}
		res, err := Check(context.Background(), m, h, Options{TimeLimit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != Ok {
			t.Fatalf("%d operations, seed %d, %.0f%% unknown: %v (%v) after %v", g.ops, g.seed, 100*g.unknown, res.Verdict, res.Cause, res.Elapsed)
		}
		verifyLinearization(t, m, h, &res)
		t.Logf("%d operations, seed %d, %.0f%% unknown: Ok in %v", g.ops, g.seed, 100*g.unknown, res.Elapsed)
	}
}
