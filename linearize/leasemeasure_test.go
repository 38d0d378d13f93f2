package linearize

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestLeaseDecidedTable measures, on leaseSim histories whose verdict is
// known by construction, how many lockproof and porcupine decide right
// within a time limit, and how long they take (paired, history by
// history). It is a measurement, not a default test:
//
//	LOCKPROOF_LEASE_TABLE=1 go test -run TestLeaseDecidedTable -v ./linearize/
//
// LOCKPROOF_LEASE_LIMIT sets the per-history limit (default 5s).
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
		n, _ = strconv.Atoi(v)
	}
	m, err := NewLeaseModel(100*time.Millisecond, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	type config struct {
		name              string
		unknown           float64
		clients, ops      int
		onlyCorrect       bool
		seed              uint64
		histories         int
		limitLP, limitPor time.Duration
	}
	configs := []config{
		{"20% unknown, 4 clients, 150 ops", 0.20, 4, 150, false, 1, n, limit, limit},
		{"30% unknown, 4 clients, 150 ops", 0.30, 4, 150, false, 2, n, limit, limit},
		{"35% unknown, 3 clients, 100 ops, correct", 0.35, 3, 100, true, 3, 400 * n / 250, limit * 2 / 5, limit * 2 / 5},
	}
	for _, c := range configs {
		var right, wrong, undecided, pRight, pWrong, pUndecided int
		var tl, tp []time.Duration
		for i := range c.histories {
			bug := bugNone
			if !c.onlyCorrect && i%2 == 1 {
				bug = leaseBug(1 + (i/2)%int(bugClasses-1))
			}
			h := leaseSimHistory(leaseSim{seed: c.seed<<32 | uint64(i), ops: c.ops, clients: c.clients, keys: 1,
				unknown: c.unknown, ttl: 100 * time.Millisecond, tol: time.Millisecond, bug: bug})
			want := Ok
			if bug != bugNone {
				want = Illegal
			}
			start := time.Now()
			res, err := Check(context.Background(), m, h, Options{TimeLimit: c.limitLP, NoMinimize: true, Workers: 1})
			tl = append(tl, time.Since(start))
			if err != nil {
				t.Fatal(err)
			}
			switch res.Verdict {
			case want:
				right++
			case Unknown:
				undecided++
			default:
				wrong++
				t.Errorf("%s: history %d (%v): lockproof says %v", c.name, i, bug, res.Verdict)
			}
			pm, ph := toPorcupine(m, h)
			start = time.Now()
			pr := porcupine.CheckOperationsTimeout(pm, ph, c.limitPor)
			tp = append(tp, time.Since(start))
			switch {
			case pr == porcupine.Unknown:
				pUndecided++
			case pcVerdict(pr == porcupine.Ok) == want:
				pRight++
			default:
				pWrong++
			}
		}
		t.Logf("%s (%d histories, limit %v): lockproof %d right, %d wrong, %d undecided; %s",
			c.name, c.histories, c.limitLP, right, wrong, undecided, quantiles(tl))
		t.Logf("%s: porcupine %d right, %d wrong, %d undecided; %s", c.name, pRight, pWrong, pUndecided, quantiles(tp))
	}
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
