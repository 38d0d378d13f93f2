package linearize

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func semModel(tb testing.TB, permits int) Model[SemaphoreState, LeaseInput, LeaseOutput] {
	tb.Helper()
	m, err := NewSemaphoreModel(permits, testTTL, time.Millisecond)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestSemaphoreModelValidates(t *testing.T) {
	for _, c := range []struct {
		permits  int
		ttl, tol time.Duration
	}{{0, time.Second, 0}, {-1, time.Second, 0}, {2, 0, 0}, {2, time.Second, -1}, {2, time.Second, time.Second}} {
		if _, err := NewSemaphoreModel(c.permits, c.ttl, c.tol); !errors.Is(err, ErrInvalidModel) {
			t.Errorf("NewSemaphoreModel(%d, %v, %v): err %v, want ErrInvalidModel", c.permits, c.ttl, c.tol, err)
		}
	}
	if _, err := NewSemaphoreModel(3, time.Second, time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// TestSemaphoreKnownBad pairs each bug with the same story told legally,
// on a semaphore of two permits with a TTL of 100 ms and a tolerance of 1.
func TestSemaphoreKnownBad(t *testing.T) {
	m := semModel(t, 2)
	cases := []struct {
		name  string
		bad   []lop
		cex   []int // IDs of the expected minimal counterexample; nil: not checked
		legal []lop
	}{
		{
			name: "third grant while two permits are certainly live",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 2, 22, 10, 12, 2),
				acquire(3, 3, 33, 50, 52, 3), // both leases run to 99 at least
			},
			cex: []int{1, 2, 3},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 2, 22, 10, 12, 2),
				acquire(3, 3, 33, 100, 102, 3), // 1's lease may have expired
			},
		},
		{
			name: "third grant after one permit was released is fine, a fourth is not",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 2, 22, 10, 12, 2),
				leaseCall(3, 1, Release, 11, 20, 22, true),
				acquire(4, 3, 33, 30, 32, 3),
				acquire(5, 4, 44, 40, 42, 4),
			},
			cex: []int{2, 4, 5}, // 11's grant and release drop out
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 2, 22, 10, 12, 2),
				leaseCall(3, 1, Release, 11, 20, 22, true),
				acquire(4, 3, 33, 30, 32, 3),
				acquire(5, 4, 44, 40, 42, 0), // refused: full
			},
		},
		{
			name: "release of a never-granted owner returns ok",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 2, Release, 99, 10, 12, true),
			},
			cex: []int{2},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				leaseCall(2, 2, Release, 99, 10, 12, false),
			},
		},
		{
			name: "token not above an earlier returned grant's",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 5),
				acquire(2, 2, 22, 10, 12, 5),
			},
			cex: []int{1, 2},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 5),
				acquire(2, 2, 22, 10, 12, 6),
			},
		},
		{
			name: "refused while a permit is free",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 2, 22, 10, 12, 0),
			},
			cex: []int{2},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 3, 33, 5, 7, 2),
				acquire(3, 2, 22, 10, 12, 0),
			},
		},
		{
			name: "renewal keeps a permit: a third grant before the renewed TTL",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 2, 22, 0, 2, 2),
				leaseCall(3, 1, Renew, 11, 60, 62, true),
				leaseCall(4, 2, Renew, 22, 60, 62, true),
				acquire(5, 3, 33, 120, 122, 3),
			},
			cex: []int{1, 2, 3, 4, 5},
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 2, 22, 0, 2, 2),
				leaseCall(3, 1, Renew, 11, 60, 62, true),
				leaseCall(4, 2, Renew, 22, 60, 62, true),
				acquire(5, 3, 33, 160, 162, 3),
			},
		},
		{
			name: "which of the expirable leases expired is a choice",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 2, 22, 0, 2, 2),
				acquire(3, 3, 33, 100, 102, 3), // one of 11 and 22 expired
				leaseCall(4, 1, Renew, 11, 110, 111, true),
				leaseCall(5, 2, Renew, 22, 110, 111, true),
			},
			cex: nil, // any that drops 11's grant and keeps its renewal: not checked
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 2, 22, 0, 2, 2),
				acquire(3, 3, 33, 100, 102, 3),
				leaseCall(4, 1, Renew, 11, 110, 111, true), // so 22's expired
				leaseCall(5, 2, Renew, 22, 110, 111, false),
			},
		},
		{
			name: "an expiry relied on pins later operations",
			bad: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 2, 22, 0, 2, 2),
				acquire(3, 3, 33, 50, 120, 3), // needs an expiry at 99 or later
				leaseCall(4, 4, Renew, 22, 51, 60, true),
				leaseCall(5, 4, Renew, 11, 51, 60, true), // both renewed before 99: none expires by 120
			},
			cex: nil, // any that drops 11's grant and keeps its renewal: not checked
			legal: []lop{
				acquire(1, 1, 11, 0, 2, 1),
				acquire(2, 2, 22, 0, 2, 2),
				acquire(3, 3, 33, 50, 120, 3),
				leaseCall(4, 4, Renew, 22, 51, 60, true),
				leaseCall(5, 4, Renew, 11, 130, 131, false), // 11's permit was the one that expired
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

// TestSemaphoreUnknownOutcomes: an unknown grant may or may not hold a
// permit, an unknown release may or may not have freed one.
func TestSemaphoreUnknownOutcomes(t *testing.T) {
	m := semModel(t, 2)
	unknown := func(op lop) lop { op.Unknown = true; return op }
	// The unknown acquire may have taken effect: the third grant is then
	// illegal, but it may as well not have.
	checkWant(t, m, []lop{
		acquire(1, 1, 11, 0, 2, 1),
		unknown(acquire(2, 2, 22, 5, 6, 0)),
		acquire(3, 3, 33, 10, 12, 2),
	}, Ok)
	// It took effect: the refusal needs it, and its lowest token is 2.
	checkWant(t, m, []lop{
		acquire(1, 1, 11, 0, 2, 1),
		unknown(acquire(2, 2, 22, 5, 6, 0)),
		acquire(3, 3, 33, 10, 12, 0),
		acquire(4, 4, 44, 20, 22, 3),
	}, Illegal)
	checkWant(t, m, []lop{
		acquire(1, 1, 11, 0, 2, 1),
		unknown(acquire(2, 2, 22, 5, 6, 0)),
		acquire(3, 3, 33, 10, 12, 0),
		leaseCall(4, 2, Release, 22, 13, 14, true),
		acquire(5, 4, 44, 20, 22, 3),
	}, Ok)
	// An unknown release of a live permit may have freed it.
	checkWant(t, m, []lop{
		acquire(1, 1, 11, 0, 2, 1),
		acquire(2, 2, 22, 0, 2, 2),
		unknown(leaseCall(3, 1, Release, 11, 10, 11, false)),
		acquire(4, 3, 33, 20, 22, 3),
	}, Ok)
	// An unknown release of someone else's permit frees nothing.
	checkWant(t, m, []lop{
		acquire(1, 1, 11, 0, 2, 1),
		acquire(2, 2, 22, 0, 2, 2),
		unknown(leaseCall(3, 3, Release, 33, 10, 11, false)),
		acquire(4, 3, 33, 20, 22, 3),
	}, Illegal)
}

// semRefStep is the semaphore's semantics written another way, for the
// differential test: before every operation any set of the leases that may
// have expired by the operation's end expires (eagerly, whether or not
// the operation needs it), then the operation applies with no expiry of
// its own. The model expires lazily, only the leases an operation needs,
// trying each choice; both must accept the same histories.
func semRefStep(dst []SemaphoreState, s SemaphoreState, op *Operation[LeaseInput, LeaseOutput], permits int, life int64) []SemaphoreState {
	end := op.End()
	if s.Floor > end {
		return dst
	}
	for _, n := range eagerExpiries(s, end) {
		dst = semRefApply(dst, n, op, permits, life)
	}
	return dst
}

// eagerExpiries returns s with each set of the leases that may have
// expired by end gone, the empty set included.
func eagerExpiries(s SemaphoreState, end int64) []SemaphoreState {
	var expirable []int
	for i, h := range s.Holders {
		if h.Expiry <= end {
			expirable = append(expirable, i)
		}
	}
	var out []SemaphoreState
	for mask := 0; mask < 1<<len(expirable); mask++ {
		var drop []int
		for b, i := range expirable {
			if mask&(1<<b) != 0 {
				drop = append(drop, i)
			}
		}
		out = append(out, s.without(drop, true))
	}
	return out
}

func semRefApply(dst []SemaphoreState, s SemaphoreState, op *Operation[LeaseInput, LeaseOutput], permits int, life int64) []SemaphoreState {
	in, out := op.Input, op.Output
	held := -1
	for i, h := range s.Holders {
		if h.Owner == in.Owner {
			held = i
		}
	}
	switch {
	case in.Op == Acquire && !op.Unknown && !out.OK:
		if len(s.Holders) >= permits {
			dst = append(dst, s)
		}
	case in.Op == Acquire:
		token := out.Token
		if op.Unknown {
			token = s.Token + 1
		}
		if token > s.Token && held < 0 && len(s.Holders) < permits {
			n := s.with(SemaphoreHolder{Owner: in.Owner, Expiry: leaseEnd(op, max(s.Floor, op.Call), life)})
			n.Token = token
			dst = append(dst, n)
		}
	case op.Unknown:
		if in.Op == Release && held >= 0 {
			dst = append(dst, s.without([]int{held}, false))
		}
	case !out.OK:
		if held < 0 {
			dst = append(dst, s)
		}
	case held >= 0 && in.Op == Release:
		dst = append(dst, s.without([]int{held}, false))
	case held >= 0:
		n := s
		n.Holders = slices.Clone(s.Holders)
		n.Holders[held].Expiry = max(n.Holders[held].Expiry, satAdd(max(s.Floor, op.Call), life))
		dst = append(dst, n)
	}
	return dst
}

// genSemaphore is a small random history on one or two semaphores: few
// owners, so that grants, releases and renewals meet, and times short
// against the TTL of 10 (tolerance 1) so that leases expire within it.
func genSemaphore(rng *rand.Rand) []Operation[LeaseInput, LeaseOutput] {
	n := 1 + rng.IntN(8)
	h := make([]Operation[LeaseInput, LeaseOutput], n)
	for i := range h {
		op := &h[i]
		c := rng.Int64N(25)
		*op = Operation[LeaseInput, LeaseOutput]{ID: i, ClientID: i, Call: c, Return: c + rng.Int64N(12)}
		op.Input = LeaseInput{Lock: "S", Op: LeaseOp(1 + rng.IntN(3)), Owner: uint64(1 + rng.IntN(4))}
		switch {
		case op.Input.Op == Acquire && rng.IntN(3) > 0:
			op.Input.Owner = uint64(10 + i) // an acquisition's owner is mostly its own
		case op.Input.Op != Acquire && i > 0 && rng.IntN(3) > 0:
			op.Input.Owner = h[rng.IntN(i)].Input.Owner // mostly someone who acquired
		}
		if rng.IntN(5) == 0 {
			op.Input.Lock = "T"
		}
		op.Output = LeaseOutput{OK: rng.IntN(4) > 0, Token: uint64(1 + rng.IntN(5))}
		op.Unknown = rng.IntN(5) == 0
	}
	return h
}

// TestSemaphoreDifferential compares Check on the semaphore model with the
// brute-force search of an independent statement of its semantics
// (semRefStep) on small random histories, for 1, 2 and 3 permits.
func TestSemaphoreDifferential(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 23))
	n := 30_000
	if deep() {
		n = 600_000
	}
	count := map[int][3]int{}
	for i := range n {
		permits := 1 + i%3
		m, err := NewSemaphoreModel(permits, 10, 1)
		if err != nil {
			t.Fatal(err)
		}
		ref := m
		ref.Step = func(dst []SemaphoreState, s SemaphoreState, op *Operation[LeaseInput, LeaseOutput]) []SemaphoreState {
			return semRefStep(dst, s, op, permits, 9)
		}
		h := genSemaphore(rng)
		res, err := Check(context.Background(), m, h, Options{NoMinimize: true, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		want := pcVerdict(bruteCheck(ref, h))
		if res.Verdict != want {
			var b []byte
			_ = EncodeHistory(&byteWriter{&b}, h)
			t.Fatalf("permits %d: Check %v, reference %v on\n%s", permits, res.Verdict, want, b)
		}
		if res.Verdict == Ok {
			verifyLinearization(t, m, h, &res)
		}
		c := count[permits]
		c[res.Verdict]++
		count[permits] = c
	}
	for permits, c := range count {
		t.Logf("permits %d: %d Ok, %d Illegal", permits, c[Ok], c[Illegal])
		if c[Ok] < n/60 || c[Illegal] < n/60 {
			t.Errorf("permits %d: verdicts too one-sided to compare (%d Ok, %d Illegal)", permits, c[Ok], c[Illegal])
		}
	}
}

// TestSemaphoreOnePermitIsTheLease: with one permit the semaphore model
// gives NewLeaseModel's verdict on every history, the random small ones
// and simulated ones with each planted bug.
func TestSemaphoreOnePermitIsTheLease(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 24))
	sem, err := NewSemaphoreModel(1, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	simSem, err := NewSemaphoreModel(1, 6*time.Millisecond, time.Millisecond/2)
	if err != nil {
		t.Fatal(err)
	}
	sameVerdictsAsLease(t, rng, sem, simSem)
}

// sameVerdictsAsLease fails t unless m, of TTL 10 and tolerance 1, gives
// NewLeaseModel's verdicts on genLease's small random histories, and sim,
// of TTL 6 ms and tolerance 0.5 ms, on the lease simulator's histories
// with each planted bug.
func sameVerdictsAsLease[S any](t *testing.T, rng *rand.Rand, m, sim Model[S, LeaseInput, LeaseOutput]) {
	t.Helper()
	lease := smallLeaseModel(t)
	count := [3]int{}
	compare := func(h []Operation[LeaseInput, LeaseOutput], sm Model[S, LeaseInput, LeaseOutput], lm Model[LeaseState, LeaseInput, LeaseOutput]) {
		t.Helper()
		a, err := Check(context.Background(), sm, h, Options{NoMinimize: true, Workers: 1, TimeLimit: decideLimit})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Check(context.Background(), lm, h, Options{NoMinimize: true, Workers: 1, TimeLimit: decideLimit})
		if err != nil {
			t.Fatal(err)
		}
		if a.Verdict != b.Verdict || a.Verdict == Unknown {
			var buf []byte
			_ = EncodeHistory(&byteWriter{&buf}, h)
			t.Fatalf("model %v, lease %v on\n%s", a.Verdict, b.Verdict, buf)
		}
		count[a.Verdict]++
	}
	n := 10_000
	if deep() {
		n = 200_000
	}
	for range n {
		compare(genLease(rng), m, lease)
	}
	simLease, err := NewLeaseModel(6*time.Millisecond, time.Millisecond/2)
	if err != nil {
		t.Fatal(err)
	}
	for range n / 10 {
		// Shorter and with fewer unknown outcomes than genLeaseSmallSim's:
		// the models compared have only the generic search, which a long
		// history with many unknown grants can keep busy past the limit.
		g := leaseSim{seed: rng.Uint64(), ops: 4 + rng.IntN(20), clients: 1 + rng.IntN(4), keys: 1 + rng.IntN(2),
			unknown: 0.05 + 0.15*rng.Float64(), ttl: 6 * time.Millisecond, tol: time.Millisecond / 2,
			bug: leaseBug(rng.IntN(int(bugClasses)))}
		h, _ := g.generate()
		compare(h, sim, simLease)
	}
	t.Logf("%d Ok, %d Illegal", count[Ok], count[Illegal])
	if count[Ok] < n/20 || count[Illegal] < n/20 {
		t.Errorf("verdicts too one-sided to compare (%d Ok, %d Illegal)", count[Ok], count[Illegal])
	}
}
