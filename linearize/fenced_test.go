package linearize

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestFencedEvident checks the stale admissions the fenced register's
// decider finds without search (verdict, counterexample, blocker), and a
// near miss of each that it must not reject; the generic search must
// agree on every one.
func TestFencedEvident(t *testing.T) {
	m := NewFencedRegisterModel(0)
	if !m.fastUsable() {
		t.Fatal("NewFencedRegisterModel's model has no usable decider")
	}
	call := func(id int, op RegisterOp, call, ret int64, tok uint64, ok bool) fenceOp {
		return fenceOp{ID: id, ClientID: id, Call: call, Return: ret,
			Input: FencedInput[int]{Op: op, Token: tok, Value: id}, Output: FencedOutput[int]{OK: ok}}
	}
	unknown := func(op fenceOp) fenceOp { op.Unknown, op.Output = true, FencedOutput[int]{}; return op }
	cases := []struct {
		name    string
		h       []fenceOp
		want    Verdict
		cex     []int // IDs, for Illegal
		blocker int   // ID, for Illegal
	}{
		{"stale write after a higher one returned", []fenceOp{call(0, Write, 0, 1, 5, true), call(1, Write, 2, 3, 4, true)}, Illegal, []int{0, 1}, 1},
		{"stale read after a higher write returned", []fenceOp{call(0, Write, 0, 1, 5, true), {ID: 1, ClientID: 1, Call: 2, Return: 3,
			Input: FencedInput[int]{Op: Read, Token: 4}, Output: FencedOutput[int]{OK: true, Value: 0}}}, Illegal, []int{0, 1}, 1},
		{"the lower write called before the higher returned", []fenceOp{call(0, Write, 0, 2, 5, true), call(1, Write, 1, 3, 4, true)}, Ok, nil, 0},
		{"an equal token", []fenceOp{call(0, Write, 0, 1, 5, true), call(1, Write, 2, 3, 5, true)}, Ok, nil, 0},
		{"the stale write refused", []fenceOp{call(0, Write, 0, 1, 5, true), call(1, Write, 2, 3, 4, false)}, Ok, nil, 0},
		{"the higher write of unknown outcome", []fenceOp{unknown(call(0, Write, 0, 1, 5, true)), call(1, Write, 2, 3, 4, true)}, Ok, nil, 0},
		{"the highest of three returned first", []fenceOp{call(0, Write, 0, 1, 7, true), call(1, Write, 2, 5, 8, true), call(2, Write, 3, 4, 6, true)}, Illegal, []int{0, 2}, 2},
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

// TestFencedDeciderDifferential compares Check of the fenced register
// (its decider, then the generic search) with the generic search alone
// and porcupine, on small random fenced histories and short simulated
// ones with and without a stale write, with unknown outcomes: no
// disagreement is allowed (LOCKPROOF_DEEP: ten times as many, oracles
// limited to 10 s instead of 250 ms).
func TestFencedDeciderDifferential(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0xfe))
	n, limit := 1000, time.Second/4
	if deep() {
		n, limit = 10_000, 10*time.Second
	}
	m := NewFencedRegisterModel(0)
	ctx := context.Background()
	var count [3]int
	undecided := 0
	for i := range n {
		h := genFenced(rng)
		if i%2 == 1 {
			_, h = genFenceSmallSim(rng)
		}
		res, err := Check(ctx, m, h, Options{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		gen, err := Check(ctx, genericOnly(m), h, Options{Workers: 1, NoMinimize: true, TimeLimit: limit})
		if err != nil {
			t.Fatal(err)
		}
		pm, ph := toPorcupine(m, h)
		pc := porcupine.CheckOperationsTimeout(pm, ph, limit)
		if gen.Verdict == Unknown && pc == porcupine.Unknown {
			undecided++
		}
		fail := func(format string, args ...any) {
			t.Helper()
			var b []byte
			_ = EncodeHistory(&byteWriter{&b}, h)
			t.Fatalf("history %d: "+format+" on\n%s", append(append([]any{i}, args...), b)...)
		}
		switch {
		case res.Verdict == Unknown:
			fail("Check gave up")
		case gen.Verdict != Unknown && gen.Verdict != res.Verdict:
			fail("Check %v, the generic search %v", res.Verdict, gen.Verdict)
		case pc != porcupine.Unknown && pcVerdict(pc == porcupine.Ok) != res.Verdict:
			fail("Check %v, porcupine %v", res.Verdict, pc)
		}
		if res.Verdict == Ok {
			verifyLinearization(t, m, h, &res)
		} else if !slices.Contains(res.Counterexample, res.Blocker) {
			fail("blocker %d not in the counterexample %v", res.Blocker, res.Counterexample)
		}
		count[res.Verdict]++
	}
	t.Logf("%d histories: %d Ok, %d Illegal; %d decided by neither oracle in %v", n, count[Ok], count[Illegal], undecided, limit)
	if count[Ok] < n/10 || count[Illegal] < n/10 {
		t.Errorf("verdicts too one-sided to compare (%d Ok, %d Illegal)", count[Ok], count[Illegal])
	}
}

// TestFencedFallsBack checks that a fenced model whose Step was replaced
// is searched with the new Step: neither its decider nor its rule for
// unknown calls that can no longer take effect (Model.spent) is used.
func TestFencedFallsBack(t *testing.T) {
	m := NewFencedRegisterModel(0)
	m.Step = func(dst []FencedState[int], _ FencedState[int], _ *fenceOp) []FencedState[int] { return dst }
	if m.fastUsable() {
		t.Fatal("the decider is still used after Step was replaced")
	}
	fm, err := fill(m)
	if err != nil {
		t.Fatal(err)
	}
	if newSubset(&fm).set.retired != nil {
		t.Fatal("the search on sets still settles unknown calls by the replaced model's rule")
	}
	// Stale by the fenced register's rule, but every known call is
	// Illegal for the new Step.
	h := []fenceOp{{ID: 0, Call: 0, Return: 1, Input: FencedInput[int]{Op: Write, Token: 1}, Output: FencedOutput[int]{OK: true}}}
	if res := check(t, m, h); res.Verdict != Illegal {
		t.Fatalf("verdict %v, want Illegal from the replaced Step", res.Verdict)
	}
}
