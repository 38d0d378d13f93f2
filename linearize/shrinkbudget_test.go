package linearize

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestShrinkHasItsOwnBudget checks that shrinking a counterexample runs
// under Options.ShrinkTimeLimit, not TimeLimit, and is reported in
// Result.ShrinkElapsed, on each path to an Illegal verdict: the lease
// decider's violations found without search and by its search, the
// fenced register's decider, and the generic search. With a shrink
// budget that is out at once the counterexample is the unshrunk one,
// not minimal but still Illegal and holding its blocker; with none set
// it inherits the decision's TimeLimit (an hour here) and is minimal.
func TestShrinkHasItsOwnBudget(t *testing.T) {
	unknown := func(op lop) lop { op.Unknown, op.Output = true, LeaseOutput{}; return op }
	lease := leaseModel(t)
	fenced := NewFencedRegisterModel(0)
	w := func(id int, call, ret int64, tok uint64) fenceOp {
		return fenceOp{ID: id, ClientID: id, Call: call, Return: ret,
			Input: FencedInput[int]{Op: Write, Token: tok, Value: id}, Output: FencedOutput[int]{OK: true}}
	}
	// The search paths' histories have an operation that shrinking drops;
	// a decider's violation found without search is its two operations
	// already, and only shrinking proves it minimal.
	doubleGrant := []lop{acquire(0, 0, 1, 0, 1, 1), acquire(1, 1, 2, 2, 50, 2), acquire(2, 2, 3, 3, 4, 0)}
	noHolder := []lop{acquire(0, 0, 1, 0, 1, 0), unknown(acquire(1, 1, 2, 5, 6, 0)), acquire(2, 2, 3, 7, 8, 1)}
	stale := []fenceOp{w(0, 0, 1, 5), w(1, 2, 3, 4), w(2, 4, 5, 6)}
	badRead := []rop{write(0, 0, 0, 1, 1), write(1, 1, 2, 3, 2), read(2, 2, 4, 5, 1)}
	cases := []struct {
		name    string
		shrinks bool
		run     func(opts Options) (Result, func(Result))
	}{
		{"lease, without search", false, func(opts Options) (Result, func(Result)) {
			return checkOpts(t, lease, doubleGrant, opts), func(r Result) { stillIllegal(t, lease, doubleGrant, r) }
		}},
		{"lease, by search", true, func(opts Options) (Result, func(Result)) {
			return checkOpts(t, lease, noHolder, opts), func(r Result) { stillIllegal(t, lease, noHolder, r) }
		}},
		{"fenced register", false, func(opts Options) (Result, func(Result)) {
			return checkOpts(t, fenced, stale, opts), func(r Result) { stillIllegal(t, fenced, stale, r) }
		}},
		{"generic search", true, func(opts Options) (Result, func(Result)) {
			return checkOpts(t, NewRegisterModel(0), badRead, opts), func(r Result) { stillIllegal(t, NewRegisterModel(0), badRead, r) }
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, confirm := c.run(Options{TimeLimit: time.Hour, ShrinkTimeLimit: time.Nanosecond})
			confirm(out)
			if out.Minimal {
				t.Errorf("minimal after a shrink budget of 1ns (counterexample %v)", out.Counterexample)
			}
			if out.ShrinkElapsed <= 0 || out.ShrinkElapsed > out.Elapsed {
				t.Errorf("ShrinkElapsed %v, Elapsed %v", out.ShrinkElapsed, out.Elapsed)
			}
			full, confirm := c.run(Options{TimeLimit: time.Hour})
			confirm(full)
			if !full.Minimal || len(full.Counterexample) > len(out.Counterexample) ||
				c.shrinks && len(full.Counterexample) == len(out.Counterexample) {
				t.Errorf("with the decision's budget: counterexample %v (minimal %v), unshrunk %v", full.Counterexample, full.Minimal, out.Counterexample)
			}
			if full.ShrinkElapsed <= 0 || full.ShrinkElapsed > full.Elapsed {
				t.Errorf("ShrinkElapsed %v, Elapsed %v", full.ShrinkElapsed, full.Elapsed)
			}
		})
	}
}

// checkOpts checks h with opts (Workers 1), which must be Illegal.
func checkOpts[S, I, O any](tb testing.TB, m Model[S, I, O], h []Operation[I, O], opts Options) Result {
	tb.Helper()
	opts.Workers = 1
	res, err := Check(context.Background(), m, h, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if res.Verdict != Illegal {
		tb.Fatalf("verdict %v, want Illegal", res.Verdict)
	}
	return res
}

// stillIllegal checks that res's counterexample holds its blocker and is
// Illegal for the generic search of m.
func stillIllegal[S, I, O any](tb testing.TB, m Model[S, I, O], h []Operation[I, O], res Result) {
	tb.Helper()
	if !slices.Contains(res.Counterexample, res.Blocker) {
		tb.Fatalf("blocker %d not in the counterexample %v", res.Blocker, res.Counterexample)
	}
	sub := make([]Operation[I, O], 0, len(res.Counterexample))
	for j, i := range res.Counterexample {
		op := h[i]
		op.ID = j
		sub = append(sub, op)
	}
	if v := check(tb, genericOnly(m), sub).Verdict; v != Illegal {
		tb.Fatalf("the counterexample %v is %v for the generic search", res.Counterexample, v)
	}
}
