package linearize

import (
	"fmt"
	"testing"
	"time"
)

func fromCallModel(tb testing.TB, ttl, tolerance time.Duration) Model[LeaseState, LeaseInput, LeaseOutput] {
	tb.Helper()
	m, err := NewLeaseFromCallModel(ttl, tolerance)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// The lease-from-call model differs from the lease model only in how it
// reckons a lease that took effect after an earlier one ran out: double
// grants, foreign releases and tokens that do not grow are as illegal as
// there.
func TestLeaseFromCall(t *testing.T) {
	cases := []struct {
		name            string
		h               []lop
		lease, fromCall Verdict
	}{
		// The Redlock twin's history under LOCKPROOF_DEEP (seed
		// 5442788728650622716, times scaled to a TTL of 100 ms): 11
		// crashed holding; 33's attempt, called at 60, set a free node at
		// once and the others once 11's copies ran out, so its lease ends
		// at 159; 44 is granted at 170.
		{"grant called before the old lease ran out, another grant a TTL after the call", []lop{
			acquire(1, 1, 11, 0, 0, 1),
			acquire(2, 2, 22, 20, 20, 0),
			acquire(3, 3, 33, 60, 110, 2),
			acquire(4, 2, 44, 170, 170, 3),
		}, Illegal, Ok},
		{"second grant within the TTL of the first's call", []lop{
			acquire(1, 1, 11, 0, 1, 1),
			acquire(2, 2, 22, 50, 51, 2),
		}, Illegal, Illegal},
		{"second grant within the TTL of a slow first grant's call", []lop{
			acquire(1, 1, 11, 0, 0, 1),
			acquire(2, 3, 33, 60, 110, 2),
			acquire(3, 2, 44, 150, 150, 3),
		}, Illegal, Illegal},
		{"second grant within the TTL of the holder's renewal", []lop{
			acquire(1, 1, 11, 0, 1, 1),
			leaseCall(2, 1, Renew, 11, 50, 51, true),
			acquire(3, 2, 22, 120, 121, 2),
		}, Illegal, Illegal},
		{"grant a TTL after the holder's renewal", []lop{
			acquire(1, 1, 11, 0, 1, 1),
			leaseCall(2, 1, Renew, 11, 50, 51, true),
			acquire(3, 2, 22, 151, 152, 2),
		}, Ok, Ok},
		{"foreign release", []lop{
			acquire(1, 1, 11, 0, 1, 1),
			leaseCall(2, 2, Release, 22, 10, 11, true),
		}, Illegal, Illegal},
		{"token that did not grow", []lop{
			acquire(1, 1, 11, 0, 1, 2),
			leaseCall(2, 1, Release, 11, 10, 11, true),
			acquire(3, 2, 22, 20, 21, 2),
		}, Illegal, Illegal},
		{"refusal of a free lock", []lop{
			acquire(1, 1, 11, 0, 1, 1),
			leaseCall(2, 1, Release, 11, 10, 11, true),
			acquire(3, 2, 22, 20, 21, 0),
		}, Illegal, Illegal},
	}
	lease, fromCall := leaseModel(t), fromCallModel(t, testTTL, time.Millisecond)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := check(t, lease, c.h).Verdict; got != c.lease {
				t.Errorf("lease model: verdict %v, want %v", got, c.lease)
			}
			checkWant(t, fromCall, c.h, c.fromCall)
		})
	}
}

// The lease-from-call model accepts every history the lease model accepts, and
// finds the double grants, foreign releases and stale tokens of generated
// lock servers that do not depend on when a lease began.
func TestLeaseFromCallGenerated(t *testing.T) {
	for _, bug := range []string{"", "double-grant", "foreign-release", "stale-token"} {
		for seed := uint64(1); seed <= 6; seed++ {
			t.Run(fmt.Sprintf("bug=%q/seed=%d", bug, seed), func(t *testing.T) {
				g := lockGen{seed: seed, ops: 400, clients: 8, keys: 2, unknownFrac: 0.02, ttl: 5 * time.Millisecond, bug: bug}
				h := g.generate()
				opts := Options{TimeLimit: decideLimit}
				lease, err := Check(t.Context(), leaseModel0(t, g.ttl), h, opts)
				if err != nil {
					t.Fatal(err)
				}
				fromCall, err := Check(t.Context(), fromCallModel(t, g.ttl, 0), h, opts)
				if err != nil {
					t.Fatal(err)
				}
				if lease.Verdict == Ok && fromCall.Verdict != Ok {
					t.Fatalf("the lease model accepts the history, the lease-from-call model says %v (cause %v)", fromCall.Verdict, fromCall.Cause)
				}
				if bug == "" && fromCall.Verdict != Ok {
					t.Fatalf("bug-free server: lease-from-call model says %v (cause %v)", fromCall.Verdict, fromCall.Cause)
				}
				if bug == "foreign-release" || bug == "stale-token" {
					if lease.Verdict == Illegal && fromCall.Verdict != Illegal {
						t.Fatalf("%s: the lease model finds it, the lease-from-call model says %v (cause %v)", bug, fromCall.Verdict, fromCall.Cause)
					}
				}
			})
		}
	}
}
