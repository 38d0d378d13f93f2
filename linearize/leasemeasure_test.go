package linearize

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestLeaseDecidedTable measures, on leaseSim and fenceSim histories whose
// verdict is known by construction, how many lockproof and porcupine
// decide right within a time limit, and how long they take (paired,
// history by history). It is a measurement, not a default test:
//
//	LOCKPROOF_LEASE_TABLE=1 go test -run TestLeaseDecidedTable -v ./linearize/
//
// LOCKPROOF_LEASE_LIMIT sets the per-history limit (default 5s; the third
// row gets 2/5 of it), LOCKPROOF_LEASE_N the histories of the first two
// rows (default 250; the third row gets 400/250 as many), and
// LOCKPROOF_LEASE_GENERIC=1 adds the generic search (the model without its
// decider) to the pair. Each row is a subtest (-run
// 'TestLeaseDecidedTable/35%' runs the third alone).
func TestLeaseDecidedTable(t *testing.T) {
	if os.Getenv("LOCKPROOF_LEASE_TABLE") == "" {
		t.Skip("set LOCKPROOF_LEASE_TABLE=1")
	}
	limit := 5 * time.Second
	if v := os.Getenv("LOCKPROOF_LEASE_LIMIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		limit = d
	}
	n := 250
	if v := os.Getenv("LOCKPROOF_LEASE_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	withGeneric := os.Getenv("LOCKPROOF_LEASE_GENERIC") != ""
	m, err := NewLeaseModel(100*time.Millisecond, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	type config struct {
		name         string
		unknown      float64
		clients, ops int
		onlyCorrect  bool
		seed         uint64
		histories    int
		limit        time.Duration
	}
	configs := []config{
		{"20% unknown, 4 clients, 150 ops", 0.20, 4, 150, false, 1, n, limit},
		{"30% unknown, 4 clients, 150 ops", 0.30, 4, 150, false, 2, n, limit},
		{"35% unknown, 3 clients, 100 ops, correct", 0.35, 3, 100, true, 3, 400 * n / 250, limit * 2 / 5},
	}
	for _, c := range configs {
		gen := func(i int) ([]Operation[LeaseInput, LeaseOutput], Verdict) {
			bug := bugNone
			if !c.onlyCorrect && i%2 == 1 {
				bug = leaseBug(1 + (i/2)%int(bugClasses-1))
			}
			h := leaseSimHistory(leaseSim{seed: c.seed<<32 | uint64(i), ops: c.ops, clients: c.clients, keys: 1,
				unknown: c.unknown, ttl: 100 * time.Millisecond, tol: time.Millisecond, bug: bug})
			if bug != bugNone {
				return h, Illegal
			}
			return h, Ok
		}
		models := []Model[LeaseState, LeaseInput, LeaseOutput]{m}
		if withGeneric {
			models = append(models, genericOnly(m))
		}
		t.Run(c.name, func(t *testing.T) { decidedRow(t, c.name, models, c.histories, c.limit, gen) })
	}
	fm := NewFencedRegisterModel(0)
	for i, u := range []float64{0.20, 0.30} {
		gen := func(j int) ([]fenceOp, Verdict) {
			g := fenceSim{seed: uint64(4+i)<<32 | uint64(j), ops: 150, clients: 4, unknown: u, staleWrite: j%2 == 1}
			if g.staleWrite {
				return fenceSimHistory(g), Illegal
			}
			return fenceSimHistory(g), Ok
		}
		name := fmt.Sprintf("fenced register, %.0f%% unknown, 4 clients, 150 ops", 100*u)
		models := []Model[FencedState[int], FencedInput[int], FencedOutput[int]]{fm}
		if withGeneric {
			models = append(models, genericOnly(fm))
		}
		t.Run(name, func(t *testing.T) { decidedRow(t, name, models, n, limit, gen) })
	}
}

// decidedRow checks n histories of gen (each with its verdict by
// construction) with each of models (Workers 1, no shrinking) and then
// porcupine, each within limit, and logs for each how many it decided
// right, wrong and not at all, with the median, p99 and maximum time per
// history, and on how many of the histories porcupine decided lockproof
// took longer. A wrong verdict of lockproof fails the test.
func decidedRow[S, I, O any](t *testing.T, name string, models []Model[S, I, O], n int, limit time.Duration, gen func(i int) ([]Operation[I, O], Verdict)) {
	t.Helper()
	type tally struct {
		right, wrong, undecided int
		times                   []time.Duration
		// slower: histories porcupine decided on which this checker took
		// longer; worst, the one of them with the highest ratio.
		slower      int
		worst, wPor time.Duration
	}
	lp := make([]tally, len(models))
	var pc tally
	count := func(tl *tally, got, want Verdict, took time.Duration) {
		tl.times = append(tl.times, took)
		switch got {
		case want:
			tl.right++
		case Unknown:
			tl.undecided++
		default:
			tl.wrong++
		}
	}
	for i := range n {
		h, want := gen(i)
		for j, m := range models {
			start := time.Now()
			res, err := Check(context.Background(), m, h, Options{TimeLimit: limit, NoMinimize: true, Workers: 1})
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != want && res.Verdict != Unknown {
				t.Errorf("%s: history %d: lockproof (model %d) says %v, want %v", name, i, j, res.Verdict, want)
			}
			count(&lp[j], res.Verdict, want, took)
		}
		pm, ph := toPorcupine(models[0], h)
		start := time.Now()
		pr := porcupine.CheckOperationsTimeout(pm, ph, limit)
		got := Unknown
		if pr != porcupine.Unknown {
			got = pcVerdict(pr == porcupine.Ok)
		}
		count(&pc, got, want, time.Since(start))
		if got == Unknown {
			continue
		}
		for j := range lp {
			tl, tp := lp[j].times[i], pc.times[i]
			if tl > tp {
				lp[j].slower++
				if lp[j].worst == 0 || float64(tl)/float64(tp) > float64(lp[j].worst)/float64(lp[j].wPor) {
					lp[j].worst, lp[j].wPor = tl, tp
				}
			}
		}
	}
	for j, tl := range lp {
		who := "lockproof"
		if j > 0 {
			who = "lockproof, generic search"
		}
		t.Logf("%s (%d histories, limit %v): %s %d right, %d wrong, %d undecided; %s; slower than porcupine on %d of the %d it decided (worst %v against %v)",
			name, n, limit, who, tl.right, tl.wrong, tl.undecided, quantiles(tl.times), tl.slower, pc.right+pc.wrong, tl.worst, tl.wPor)
	}
	t.Logf("%s: porcupine %d right, %d wrong, %d undecided; %s", name, pc.right, pc.wrong, pc.undecided, quantiles(pc.times))
}

// quantiles renders the median, p99 and maximum of ds.
func quantiles(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return "no times"
	}
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return "median " + q(0.5).String() + ", p99 " + q(0.99).String() + ", max " + s[len(s)-1].String()
}
