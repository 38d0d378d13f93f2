package linearize

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func rwModel(tb testing.TB) Model[RWLeaseState, LeaseInput, LeaseOutput] {
	tb.Helper()
	m, err := NewRWLeaseModel(testTTL, time.Millisecond)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// racquire is acquire in shared (read) mode.
func racquire(id, client int, owner uint64, call, ret int64, token uint64) lop {
	op := acquire(id, client, owner, call, ret, token)
	op.Input.Shared = true
	return op
}

func TestRWLeaseModelValidates(t *testing.T) {
	for _, c := range []struct{ ttl, tol time.Duration }{{0, 0}, {time.Second, -1}, {time.Second, time.Second}} {
		if _, err := NewRWLeaseModel(c.ttl, c.tol); !errors.Is(err, ErrInvalidModel) {
			t.Errorf("NewRWLeaseModel(%v, %v): err %v, want ErrInvalidModel", c.ttl, c.tol, err)
		}
	}
}

// TestRWLeaseKnownBad pairs each bug with the same story told legally, on
// a read-write lock with a TTL of 100 ms and a tolerance of 1.
func TestRWLeaseKnownBad(t *testing.T) {
	m := rwModel(t)
	cases := []struct {
		name  string
		bad   []lop
		cex   []int // IDs of the expected minimal counterexample; nil: not checked
		legal []lop
	}{
		{
			name: "writer granted while a reader's lease is certainly live",
			bad: []lop{
				racquire(1, 1, 11, 0, 2, 1),
				racquire(2, 2, 22, 10, 12, 2),
				leaseCall(3, 1, Release, 11, 20, 22, true),
				acquire(4, 3, 33, 50, 52, 3), // 22 reads until 109 at least
			},
			cex: []int{2, 4},
			legal: []lop{
				racquire(1, 1, 11, 0, 2, 1),
				racquire(2, 2, 22, 10, 12, 2),
				leaseCall(3, 1, Release, 11, 20, 22, true),
				leaseCall(4, 2, Release, 22, 30, 32, true),
				acquire(5, 3, 33, 50, 52, 3),
			},
		},
		{
			name: "reader granted while a writer's lease is certainly live",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				racquire(2, 2, 22, 50, 52, 2),
			},
			cex: []int{1, 2},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				racquire(2, 2, 22, 100, 102, 2), // 11's lease may have expired at 99
			},
		},
		{
			name: "two writers",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 2, 22, 10, 12, 2),
			},
			cex: []int{1, 2},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 1, Release, 11, 5, 6, true),
				acquire(3, 2, 22, 10, 12, 2),
			},
		},
		{
			name: "a reader's token not above the writer's before it",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 5),
				leaseCall(2, 1, Release, 11, 5, 6, true),
				racquire(3, 2, 22, 10, 12, 5),
			},
			cex: []int{1, 3},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 5),
				leaseCall(2, 1, Release, 11, 5, 6, true),
				racquire(3, 2, 22, 10, 12, 6),
			},
		},
		{
			name: "readers share one counter: a second reader's token repeats the first's",
			bad: []lop{
				racquire(1, 1, 11, 0, 2, 3),
				racquire(2, 2, 22, 10, 12, 3),
			},
			cex: []int{1, 2},
			legal: []lop{
				racquire(1, 1, 11, 0, 2, 3),
				racquire(2, 2, 22, 10, 12, 4),
			},
		},
		{
			name: "a reader refused on a free lock",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 1, Release, 11, 5, 6, true),
				racquire(3, 2, 22, 10, 12, 0),
			},
			cex: []int{3},
			legal: []lop{
				racquire(1, 1, 11, 0, 2, 1),
				racquire(2, 2, 22, 10, 12, 0), // a writer may be waiting
			},
		},
		{
			name: "a reader's lease released by someone else",
			bad: []lop{
				racquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 2, Release, 99, 10, 12, true),
			},
			cex: []int{2},
			legal: []lop{
				racquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 2, Release, 99, 10, 12, false),
			},
		},
		{
			name: "a renewed reader holds the writer off past its first TTL",
			bad: []lop{
				racquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 1, Renew, 11, 60, 62, true),
				acquire(3, 2, 22, 120, 122, 2),
			},
			cex: []int{1, 2, 3},
			legal: []lop{
				racquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 1, Renew, 11, 60, 62, true),
				acquire(3, 2, 22, 160, 162, 2),
			},
		},
		{
			name: "a writer that relied on every reader's expiry pins later operations",
			bad: []lop{
				racquire(1, 1, 11, 0, 2, 1),
				racquire(2, 2, 22, 40, 42, 2),
				acquire(3, 3, 33, 100, 200, 3),               // needs 22 gone: at 139 or later
				leaseCall(4, 3, Release, 33, 120, 130, true), // before 139
			},
			cex: nil, // the release alone (33 never granted) is a smaller one: not checked
			legal: []lop{
				racquire(1, 1, 11, 0, 2, 1),
				racquire(2, 2, 22, 40, 42, 2),
				acquire(3, 3, 33, 100, 200, 3),
				leaseCall(4, 3, Release, 33, 120, 140, true),
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := checkWant(t, m, c.bad, Illegal)
			if got := ids(c.bad, res.Counterexample); c.cex != nil && !slices.Equal(got, c.cex) {
				t.Errorf("counterexample %v, want %v", got, c.cex)
			}
			checkWant(t, m, c.legal, Ok)
		})
	}
}

// TestRWLeaseUnknownOutcomes: an unknown grant may or may not hold a
// lease, an unknown release may or may not have freed one.
func TestRWLeaseUnknownOutcomes(t *testing.T) {
	m := rwModel(t)
	unknown := func(op lop) lop { op.Unknown = true; return op }
	// The unknown write may never have taken effect: the reader is fine.
	checkWant(t, m, []lop{
		unknown(acquire(1, 1, 11, 0, 1, 0)),
		racquire(2, 2, 22, 10, 12, 1),
	}, Ok)
	// The refusal needs it to have taken effect, with token 1 at least:
	// a later grant of token 1 is then a regression.
	checkWant(t, m, []lop{
		unknown(acquire(1, 1, 11, 0, 1, 0)),
		racquire(2, 2, 22, 10, 12, 0),
		leaseCall(3, 1, Release, 11, 20, 21, true),
		racquire(4, 2, 33, 30, 32, 1),
	}, Illegal)
	checkWant(t, m, []lop{
		unknown(acquire(1, 1, 11, 0, 1, 0)),
		racquire(2, 2, 22, 10, 12, 0),
		leaseCall(3, 1, Release, 11, 20, 21, true),
		racquire(4, 2, 33, 30, 32, 2),
	}, Ok)
	// An unknown release of a reader may have let the writer in; one of
	// another owner may not.
	checkWant(t, m, []lop{
		racquire(1, 1, 11, 0, 2, 1),
		unknown(leaseCall(2, 1, Release, 11, 10, 11, false)),
		acquire(3, 2, 22, 20, 22, 2),
	}, Ok)
	checkWant(t, m, []lop{
		racquire(1, 1, 11, 0, 2, 1),
		unknown(leaseCall(2, 1, Release, 44, 10, 11, false)),
		acquire(3, 2, 22, 20, 22, 2),
	}, Illegal)
}

// rwRefStep is the read-write lock's semantics written another way, for
// the differential test: before every operation any set of the leases that
// may have expired by its end expires (eagerly, needed or not), then the
// operation applies with no expiry of its own. The lease held is a list of
// (owner, mode) pairs checked by counting, not RWLeaseState's invariant.
func rwRefStep(dst []RWLeaseState, s RWLeaseState, op *Operation[LeaseInput, LeaseOutput], life int64) []RWLeaseState {
	end := op.End()
	if s.Floor > end {
		return dst
	}
	for _, n := range eagerExpiries(s.SemaphoreState, end) {
		dst = rwRefApply(dst, RWLeaseState{SemaphoreState: n, Exclusive: s.Exclusive && len(n.Holders) > 0}, op, life)
	}
	return dst
}

func rwRefApply(dst []RWLeaseState, s RWLeaseState, op *Operation[LeaseInput, LeaseOutput], life int64) []RWLeaseState {
	in, out := op.Input, op.Output
	held := -1
	for i, h := range s.Holders {
		if h.Owner == in.Owner {
			held = i
		}
	}
	writers, readers := 0, 0
	if s.Exclusive {
		writers = len(s.Holders)
	} else {
		readers = len(s.Holders)
	}
	drop := func(i int) RWLeaseState {
		n := RWLeaseState{SemaphoreState: s.without([]int{i}, false), Exclusive: s.Exclusive}
		n.Exclusive = n.Exclusive && len(n.Holders) > 0
		return n
	}
	switch {
	case in.Op == Acquire && !op.Unknown && !out.OK:
		if writers+readers > 0 {
			dst = append(dst, s)
		}
	case in.Op == Acquire:
		token := out.Token
		if op.Unknown {
			token = s.Token + 1
		}
		admitted := writers == 0 && (in.Shared || readers == 0)
		if token > s.Token && held < 0 && admitted {
			n := RWLeaseState{SemaphoreState: s.with(SemaphoreHolder{Owner: in.Owner, Expiry: leaseEnd(op, max(s.Floor, op.Call), life)}),
				Exclusive: !in.Shared}
			n.Token = token
			dst = append(dst, n)
		}
	case op.Unknown:
		if in.Op == Release && held >= 0 {
			dst = append(dst, drop(held))
		}
	case !out.OK:
		if held < 0 {
			dst = append(dst, s)
		}
	case held >= 0 && in.Op == Release:
		dst = append(dst, drop(held))
	case held >= 0:
		n := s
		n.Holders = slices.Clone(s.Holders)
		n.Holders[held].Expiry = max(n.Holders[held].Expiry, satAdd(max(s.Floor, op.Call), life))
		dst = append(dst, n)
	}
	return dst
}

// genRW is genSemaphore's small random history with each acquire shared
// or exclusive at random.
func genRW(rng *rand.Rand) []Operation[LeaseInput, LeaseOutput] {
	h := genSemaphore(rng)
	for i := range h {
		h[i].Input.Shared = h[i].Input.Op == Acquire && rng.IntN(2) == 0
	}
	return h
}

// TestRWLeaseDifferential compares Check on the read-write model with the
// brute-force search of an independent statement of its semantics
// (rwRefStep) on small random histories.
func TestRWLeaseDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 25))
	n := 30_000
	if deep() {
		n = 600_000
	}
	m, err := NewRWLeaseModel(10, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := m
	ref.Step = func(dst []RWLeaseState, s RWLeaseState, op *Operation[LeaseInput, LeaseOutput]) []RWLeaseState {
		return rwRefStep(dst, s, op, 9)
	}
	var count [3]int
	for range n {
		h := genRW(rng)
		res, err := Check(context.Background(), m, h, Options{NoMinimize: true, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		if want := pcVerdict(bruteCheck(ref, h)); res.Verdict != want {
			var b []byte
			_ = EncodeHistory(&byteWriter{&b}, h)
			t.Fatalf("Check %v, reference %v on\n%s", res.Verdict, want, b)
		}
		if res.Verdict == Ok {
			verifyLinearization(t, m, h, &res)
		}
		count[res.Verdict]++
	}
	t.Logf("%d Ok, %d Illegal", count[Ok], count[Illegal])
	if count[Ok] < n/20 || count[Illegal] < n/20 {
		t.Errorf("verdicts too one-sided to compare (%d Ok, %d Illegal)", count[Ok], count[Illegal])
	}
}

// TestRWLeaseWithoutReadersIsTheLease: with no shared acquire the
// read-write model gives NewLeaseModel's verdict on every history, the
// random small ones and simulated ones with each planted bug.
func TestRWLeaseWithoutReadersIsTheLease(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 26))
	rw, err := NewRWLeaseModel(10, 1)
	if err != nil {
		t.Fatal(err)
	}
	simRW, err := NewRWLeaseModel(6*time.Millisecond, time.Millisecond/2)
	if err != nil {
		t.Fatal(err)
	}
	sameVerdictsAsLease(t, rng, rw, simRW)
}

// TestRWLeaseJSON: an exclusive acquire encodes as before, without
// "shared"; a shared one carries "shared": true and decodes back.
func TestRWLeaseJSON(t *testing.T) {
	h := []lop{acquire(1, 1, 11, 0, 2, 1), racquire(2, 2, 22, 5, 6, 2)}
	var b []byte
	if err := EncodeHistory(&byteWriter{&b}, h); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"shared"`); n != 1 {
		t.Fatalf(`"shared" %d times, want once (the reader's):%s`, n, b)
	}
	got, err := DecodeHistory[LeaseInput, LeaseOutput](strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, h) {
		t.Errorf("decoded %+v, want %+v", got, h)
	}
}
