package linearize

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
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
// decider) to the pair, and LOCKPROOF_LEASE_REPS the runs per history and
// checker whose least time counts (default 5; see decidedRow). Each row is
// a subtest (-run 'TestLeaseDecidedTable/35%' runs the third alone). It
// fails on a wrong verdict, and with 5 or more runs per history when
// lockproof took longer than porcupine beyond slowMargin on a history
// porcupine decided (an undecided history counts as the limit).
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
//
// Each history is checked reps times by every checker in turn (lockproof's
// models, then porcupine, then again), and a checker's time on it is the
// least of its runs: the minimum is what noise (other processes, the
// collector, the scheduler) only ever adds to. A checker stops repeating
// a history once its runs of it have taken a second in all, or once a run
// was undecided (at the limit every run is); such histories are not the
// quick ones this measures.
func decidedRow[S, I, O any](t *testing.T, name string, models []Model[S, I, O], n int, limit time.Duration, gen func(i int) ([]Operation[I, O], Verdict)) {
	t.Helper()
	reps := 5
	if v := os.Getenv("LOCKPROOF_LEASE_REPS"); v != "" {
		var err error
		if reps, err = strconv.Atoi(v); err != nil || reps < 1 {
			t.Fatalf("LOCKPROOF_LEASE_REPS=%q", v)
		}
	}
	type tally struct {
		right, wrong, undecided int
		times                   []time.Duration
		// slower: histories porcupine decided on which this checker took
		// longer; beyond, those of them where it took longer than
		// slowMargin allows; worst, the one of them with the highest ratio.
		slower, beyond int
		worst, wPor    time.Duration
		list           []string // the histories beyond the margin
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
		pm, ph := toPorcupine(models[0], h)
		got := make([]Verdict, len(models)+1)
		best := make([]time.Duration, len(models)+1)
		spent := make([]time.Duration, len(models)+1)
		for r := range reps {
			for j := range got {
				if r > 0 && (got[j] == Unknown || spent[j] >= time.Second) {
					continue
				}
				var v Verdict
				start := time.Now()
				if j < len(models) {
					res, err := Check(context.Background(), models[j], h, Options{TimeLimit: limit, NoMinimize: true, Workers: 1})
					if err != nil {
						t.Fatal(err)
					}
					v = res.Verdict
				} else if pr := porcupine.CheckOperationsTimeout(pm, ph, limit); pr != porcupine.Unknown {
					v = pcVerdict(pr == porcupine.Ok)
				}
				took := time.Since(start)
				spent[j] += took
				if r > 0 && v != got[j] {
					if v == Unknown {
						// Near the limit a run may pass it: that run does
						// not count, and the history is not a quick one.
						spent[j] = time.Second
						continue
					}
					t.Fatalf("%s: history %d: checker %d says %v, then %v", name, i, j, got[j], v)
				}
				got[j] = v
				if r == 0 || took < best[j] {
					best[j] = took
				}
			}
		}
		for j := range models {
			if got[j] != want && got[j] != Unknown {
				t.Errorf("%s: history %d: lockproof (model %d) says %v, want %v", name, i, j, got[j], want)
			}
			count(&lp[j], got[j], want, best[j])
		}
		tp := best[len(models)]
		count(&pc, got[len(models)], want, tp)
		if got[len(models)] == Unknown {
			continue
		}
		for j := range lp {
			tl := best[j]
			if tl <= tp {
				continue
			}
			lp[j].slower++
			if lp[j].worst == 0 || float64(tl)/float64(tp) > float64(lp[j].worst)/float64(lp[j].wPor) {
				lp[j].worst, lp[j].wPor = tl, tp
			}
			if tl > slowMargin(tp) {
				lp[j].beyond++
				lp[j].list = append(lp[j].list, fmt.Sprintf("#%d %v/%v", i, tl, tp))
			}
		}
	}
	for j, tl := range lp {
		who := "lockproof"
		if j > 0 {
			who = "lockproof, generic search"
		}
		t.Logf("%s (%d histories, limit %v, best of %d): %s %d right, %d wrong, %d undecided; %s; slower than porcupine on %d of the %d it decided (worst %v against %v), beyond the margin on %d: %s",
			name, n, limit, reps, who, tl.right, tl.wrong, tl.undecided, quantiles(tl.times), tl.slower, pc.right+pc.wrong, tl.worst, tl.wPor, tl.beyond, strings.Join(tl.list, ", "))
		if tl.beyond > 0 && reps >= 5 {
			t.Errorf("%s: %s slower than porcupine beyond the margin on %d histories", name, who, tl.beyond)
		}
	}
	t.Logf("%s: porcupine %d right, %d wrong, %d undecided; %s", name, pc.right, pc.wrong, pc.undecided, quantiles(pc.times))
}

// slowMargin is the time up to which lockproof's best time on a history
// counts as no slower than porcupine's best time p there: p and a quarter,
// plus 20 µs. That is the noise of the measurement, not a slowdown
// allowed: in two best-of-5 measurements of the same checker on each of
// the 400 correct histories of the 35% row (one process, load average
// 2.7), lockproof's two times differed by at most 1.4 times and 16 µs
// (99th percentile 1.26 times and 7 µs). Porcupine's differed by up to
// 2.8 times and 128 µs (it allocates far more, and the collector's work
// lands on some runs): its best may still be too high, which hides a
// slowdown rather than invents one. So the test fails, with 5 or more
// repetitions, on a history where lockproof took longer than the margin;
// a run that only reports histories slower by less may be noise. Before
// the fix of issue 19's last item, 9 of the 400 (lease decider) and 7
// (generic search) were beyond it, at 1.6 to 2.1 times porcupine's time.
func slowMargin(p time.Duration) time.Duration { return p + p/4 + 20*time.Microsecond }

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
