package linearize

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

const testTTL = 100 * time.Millisecond

func leaseModel(tb testing.TB) Model[LeaseState, LeaseInput, LeaseOutput] {
	tb.Helper()
	m, err := NewLeaseModel(testTTL, time.Millisecond)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

type lop = Operation[LeaseInput, LeaseOutput]

// ms builds times in milliseconds.
func ms(n int64) int64 { return n * int64(time.Millisecond) }

func acquire(id, client int, owner uint64, call, ret int64, token uint64) lop {
	return lop{ID: id, ClientID: client, Call: ms(call), Return: ms(ret),
		Input:  LeaseInput{Lock: "L", Op: Acquire, Owner: owner},
		Output: LeaseOutput{OK: token != 0, Token: token}}
}

func leaseCall(id, client int, op LeaseOp, owner uint64, call, ret int64, ok bool) lop {
	return lop{ID: id, ClientID: client, Call: ms(call), Return: ms(ret),
		Input: LeaseInput{Lock: "L", Op: op, Owner: owner}, Output: LeaseOutput{OK: ok}}
}

func check[S, I, O any](tb testing.TB, m Model[S, I, O], h []Operation[I, O]) Result {
	tb.Helper()
	res, err := Check(context.Background(), m, h, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// checkWant checks h with default options, fails unless the verdict is
// want, and replays an Ok witness.
func checkWant[S, I, O any](tb testing.TB, m Model[S, I, O], h []Operation[I, O], want Verdict) Result {
	tb.Helper()
	res := check(tb, m, h)
	if res.Verdict != want {
		tb.Fatalf("verdict %v, want %v", res.Verdict, want)
	}
	if res.Verdict == Ok {
		verifyLinearization(tb, m, h, &res)
	}
	return res
}

// ids returns the IDs of the operations at the given history indices.
func ids[I, O any](h []Operation[I, O], idx []int) []int {
	out := make([]int, len(idx))
	for i, j := range idx {
		out[i] = h[j].ID
	}
	slices.Sort(out)
	return out
}

func TestLeaseKnownBad(t *testing.T) {
	m := leaseModel(t)
	cases := []struct {
		name    string
		bad     []lop
		cex     []int // IDs of the expected minimal counterexample
		legal   []lop // the same story where the expiry (or refusal) is legal
		comment string
	}{
		{
			name: "double grant before the TTL",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 3, 33, 20, 21, 0), // refused: held
				acquire(3, 2, 22, 50, 52, 2), // 1's lease runs to 99 at least
				leaseCall(4, 3, Release, 33, 60, 61, false),
			},
			cex: []int{1, 3},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 3, 33, 20, 21, 0),
				acquire(3, 2, 22, 100, 102, 2), // after 0+100-1: may have expired
				leaseCall(4, 3, Release, 33, 130, 131, false),
			},
		},
		{
			name: "renewal extends the lease: grant after the first TTL but before the renewed one",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 1, Renew, 11, 50, 52, true),
				acquire(3, 2, 22, 120, 122, 2),
			},
			cex: []int{1, 2, 3},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 1, Renew, 11, 50, 52, true),
				acquire(3, 2, 22, 150, 152, 2),
			},
		},
		{
			name: "foreign release accepted",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 2, Release, 22, 10, 12, true), // 22 never held it
				acquire(3, 2, 33, 20, 22, 2),
			},
			cex: []int{2},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 2, Release, 22, 10, 12, false), // refused, changes nothing
				acquire(3, 2, 33, 20, 22, 0),                // so the lock is still held
				acquire(4, 2, 44, 120, 122, 2),              // until it may expire
			},
		},
		{
			name: "foreign renew accepted",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 2, Renew, 22, 10, 12, true),
			},
			cex: []int{2},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 2, Renew, 22, 10, 12, false),
			},
		},
		{
			name: "fencing token does not increase",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 5),
				acquire(2, 2, 22, 200, 202, 5),
			},
			cex: []int{1, 2},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 5),
				acquire(2, 2, 22, 200, 202, 6),
			},
		},
		{
			name: "holder told not-held before its lease could expire",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 1, Release, 11, 30, 31, false),
			},
			cex: []int{1, 2},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 1, Release, 11, 130, 131, false),
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := check(t, m, c.bad)
			if res.Verdict != Illegal {
				t.Fatalf("bad history: verdict %v, want Illegal", res.Verdict)
			}
			if !res.Minimal {
				t.Fatal("counterexample not shrunk to minimal")
			}
			if got := ids(c.bad, res.Counterexample); !slices.Equal(got, c.cex) {
				t.Fatalf("counterexample ids %v, want %v", got, c.cex)
			}
			assertMinimal(t, m, c.bad, res)
			if res := check(t, m, c.legal); res.Verdict != Ok {
				t.Fatalf("legal variant: verdict %v, want Ok", res.Verdict)
			}
		})
	}
}

// assertMinimal checks the counterexample fails at the result's blocker
// and that dropping any one of its operations gives an Ok history or one
// that fails at another operation.
func assertMinimal[S, I, O any](tb testing.TB, m Model[S, I, O], h []Operation[I, O], res Result) {
	tb.Helper()
	blocker := h[res.Blocker].ID
	sub := func(skip int) []Operation[I, O] {
		var out []Operation[I, O]
		for i, j := range res.Counterexample {
			if i != skip {
				out = append(out, h[j])
			}
		}
		return out
	}
	whole := sub(-1)
	if r := check(tb, m, whole); r.Verdict != Illegal || whole[r.Blocker].ID != blocker {
		tb.Fatalf("counterexample alone: %v, want Illegal at op %d", r.Verdict, blocker)
	}
	for i := range res.Counterexample {
		part := sub(i)
		r := check(tb, m, part)
		if r.Verdict == Illegal && part[r.Blocker].ID == blocker {
			tb.Fatalf("counterexample without op %d still fails at op %d: not minimal", h[res.Counterexample[i]].ID, blocker)
		}
	}
}

// TestLeaseExpiryPinsLaterOperations: an operation that relies on the
// holder's lease having expired took effect at or after the earliest
// expiry, and so did everything linearized after it. Here 33's grant needs
// 11's lease to have expired (not before 99ms), and 33's release, which
// returned at 50ms, can only follow the grant: no linearization exists,
// although each step alone looks fine.
func TestLeaseExpiryPinsLaterOperations(t *testing.T) {
	m := leaseModel(t)
	bad := []lop{
		acquire(1, 1, 11, 0, 2, 1),
		acquire(2, 2, 33, 10, 300, 2),
		leaseCall(3, 2, Release, 33, 20, 50, true),
	}
	if got := check(t, m, bad).Verdict; got != Illegal {
		t.Fatalf("verdict %v, want Illegal", got)
	}
	legal := slices.Clone(bad)
	legal[2].Return = ms(150)
	if got := check(t, m, legal).Verdict; got != Ok {
		t.Fatalf("release returning after the expiry: verdict %v, want Ok", got)
	}
}

func TestLeaseToleranceBoundary(t *testing.T) {
	m := leaseModel(t) // ttl 100ms, tolerance 1ms: expiry from call+99ms
	for _, tc := range []struct {
		ret  int64 // µs of the second grant's return
		want Verdict
	}{{98_999, Illegal}, {99_000, Ok}, {99_001, Ok}} {
		h := []lop{
			acquire(1, 1, 11, 0, 2, 1),
			{ID: 2, ClientID: 2, Call: 0, Return: tc.ret * int64(time.Microsecond),
				Input: LeaseInput{Lock: "L", Op: Acquire, Owner: 22}, Output: LeaseOutput{OK: true, Token: 2}},
		}
		if got := check(t, m, h).Verdict; got != tc.want {
			t.Errorf("second grant returning at %dµs: %v, want %v", tc.ret, got, tc.want)
		}
	}
}

func TestLeaseUnknownOutcomes(t *testing.T) {
	m := leaseModel(t)
	unknown := func(o lop) lop { o.Unknown, o.Output = true, LeaseOutput{}; return o }
	cases := []struct {
		name string
		h    []lop
		want Verdict
	}{
		{"unknown acquire that took effect lets its owner release", []lop{
			unknown(acquire(1, 1, 11, 0, 2, 0)),
			leaseCall(2, 2, Release, 11, 10, 12, true),
		}, Ok},
		{"unknown acquire that never took effect", []lop{
			unknown(acquire(1, 1, 11, 0, 2, 0)),
			acquire(2, 2, 22, 10, 12, 1),
		}, Ok},
		{"unknown acquire consumed a token: the next grant needs a higher one", []lop{
			acquire(1, 1, 11, 0, 1, 1),
			leaseCall(2, 1, Release, 11, 2, 3, true),
			unknown(acquire(3, 2, 22, 4, 5, 0)),
			leaseCall(4, 2, Release, 22, 6, 7, true), // so 3 took effect, with token >= 2
			acquire(5, 3, 33, 8, 9, 2),               // token 2 cannot follow
		}, Illegal},
		{"unknown acquire taking effect after the client gave up", []lop{
			unknown(acquire(1, 1, 11, 0, 1, 0)),
			acquire(2, 2, 22, 5, 6, 0), // refused: held by 11, granted after its call returned
		}, Ok},
		{"unknown release may free the lock", []lop{
			acquire(1, 1, 11, 0, 1, 1),
			unknown(leaseCall(2, 1, Release, 11, 2, 3, false)),
			acquire(3, 2, 22, 4, 5, 2),
		}, Ok},
		{"unknown release by a foreign owner frees nothing", []lop{
			acquire(1, 1, 11, 0, 1, 1),
			unknown(leaseCall(2, 2, Release, 22, 2, 3, false)),
			acquire(3, 2, 33, 4, 5, 2),
		}, Illegal},
		{"unknown renew cannot explain a grant", []lop{
			acquire(1, 1, 11, 0, 1, 1),
			unknown(leaseCall(2, 1, Renew, 11, 2, 3, false)),
			acquire(3, 2, 22, 50, 51, 2),
		}, Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := check(t, m, c.h).Verdict; got != c.want {
				t.Fatalf("verdict %v, want %v", got, c.want)
			}
		})
	}
}

func TestLeaseGenerated(t *testing.T) {
	for _, bug := range []string{"", "double-grant", "foreign-release", "stale-token"} {
		t.Run(fmt.Sprintf("bug=%q", bug), func(t *testing.T) {
			g := lockGen{seed: 7, ops: 3000, clients: 16, keys: 4, unknownFrac: 0.01, ttl: 5 * time.Millisecond, bug: bug}
			h := g.generate()
			res, err := Check(t.Context(), leaseModel0(t, g.ttl), h, Options{TimeLimit: decideLimit})
			if err != nil {
				t.Fatal(err)
			}
			want := Ok
			if bug != "" {
				want = Illegal
			}
			if res.Verdict != want {
				t.Fatalf("verdict %v (cause %v), want %v", res.Verdict, res.Cause, want)
			}
			if want == Illegal {
				if !res.Minimal {
					t.Fatalf("counterexample of %d ops not minimal", len(res.Counterexample))
				}
				assertMinimal(t, leaseModel0(t, g.ttl), h, res)
			}
		})
	}
}

func leaseModel0(tb testing.TB, ttl time.Duration) Model[LeaseState, LeaseInput, LeaseOutput] {
	tb.Helper()
	m, err := NewLeaseModel(ttl, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// TestLock100k checks the generated history of the performance target
// (deep runs only: generating it takes a few seconds with -race).
func TestLock100k(t *testing.T) {
	if !deep() {
		t.Skip("set LOCKPROOF_DEEP=1")
	}
	h := lock100k()
	m := leaseModel0(t, 5*time.Millisecond)
	res, err := Check(t.Context(), m, h, Options{TimeLimit: time.Minute})
	if err != nil || res.Verdict != Ok {
		t.Fatalf("verdict %v (cause %v), err %v", res.Verdict, res.Cause, err)
	}
	verifyLinearization(t, m, h, &res)
	t.Logf("%d operations checked in %v", len(h), res.Elapsed)
}
