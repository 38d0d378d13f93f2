package linearize

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"
)

// readLeaseHistory decodes a lease history from a JSON file of testdata.
func readLeaseHistory(tb testing.TB, name string) []Operation[LeaseInput, LeaseOutput] {
	tb.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	h, err := DecodeHistory[LeaseInput, LeaseOutput](f)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// TestRelaxedTokenRegressionAmongUnknowns checks simulated lease
// histories where a grant returned before a grant with a lower token was
// called, among many unknown acquires: 34 operations, 2 clients, 22 of
// them unknown, op 11 granted token 3 and op 21 token 2 (the generic
// search took 27 s to prove it Illegal, 21 s of search and 6 s of
// shrinking, because the split search and the search on sets both went
// through the ways the unknown acquires around them may have taken
// effect); and 37 operations, 16 unknown acquires before op 26's token
// 5, after op 21's token 6 (the relaxed search's closures need 36,878
// states here). The relaxed search (relax.go) proves them at once, and
// shrinks them: the time limit only keeps a regression from hanging.
func TestRelaxedTokenRegressionAmongUnknowns(t *testing.T) {
	m, err := NewLeaseModel(6*time.Millisecond, time.Millisecond/2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file        string
		grant, less int // the grant and the later one with a lower token
	}{
		{"token-regress-among-unknown-acquires-34.json", 11, 21},
		{"token-regress-among-unknown-acquires-37.json", 21, 26},
	} {
		h := readLeaseHistory(t, c.file)
		// A step budget, about ten times what the search takes (one
		// worker counts the same steps on any machine), so that a loaded
		// machine cannot turn the verdict into Unknown; the time limit
		// is only a backstop.
		res, err := Check(context.Background(), genericOnly(m), h, Options{Workers: 1, MaxSteps: 5_000_000, TimeLimit: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != Illegal {
			t.Fatalf("%s: verdict %v (%v) after %v and %d steps, want Illegal", c.file, res.Verdict, res.Cause, res.Elapsed, res.Steps)
		}
		if !slices.Contains(res.Counterexample, c.grant) || !slices.Contains(res.Counterexample, c.less) {
			t.Fatalf("%s: counterexample %v, want one with ops %d and %d", c.file, res.Counterexample, c.grant, c.less)
		}
		stillIllegal(t, m, h, res)
		t.Logf("%s: Illegal in %v and %d steps (shrinking %v), counterexample %v", c.file, res.Elapsed, res.Steps, res.ShrinkElapsed, res.Counterexample)
	}
}

// checkRelaxed runs the relaxed search alone on each partition of h,
// within limit, and shrinks an Illegal partition with it.
func checkRelaxed[S, I, O any](tb testing.TB, m Model[S, I, O], h []Operation[I, O], limit time.Duration) Result {
	tb.Helper()
	return searchSetsAlone(tb, m, h, limit, newRelaxed[S, I, O], false)
}

// relaxedAgrees checks that h is Illegal for the split search alone when
// the relaxed search says so, and that the relaxed counterexample is
// Illegal too. It returns the relaxed verdict and the exact one (Unknown
// if the split search did not decide within limit).
func relaxedAgrees[S, I, O any](t *testing.T, m Model[S, I, O], h []Operation[I, O], limit time.Duration) [2]Verdict {
	t.Helper()
	rel := checkRelaxed(t, m, h, limit)
	ex := checkOn(t, m, h, 0, limit)
	if rel.Verdict == Illegal {
		if ex.Verdict == Ok {
			var b []byte
			_ = EncodeHistory(&byteWriter{&b}, h)
			t.Fatalf("the relaxed search says Illegal (blocker %d), the split search Ok:\n%s", rel.Blocker, b)
		}
		stillIllegal(t, m, h, rel)
	}
	return [2]Verdict{rel.Verdict, ex.Verdict}
}

// TestRelaxedSound compares the relaxed search with the split search on
// small random histories of every model with unknown outcomes: an Illegal
// from the relaxed search must be an Illegal history (its Ok means
// nothing). It also counts how many Illegal histories the relaxed search
// proves, which must be some of each model's.
func TestRelaxedSound(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x7e1a))
	n := 200
	if deep() {
		n = 2000
	}
	limit := time.Second / 4
	lease := smallLeaseModel(t)
	sim, err := NewLeaseModel(6*time.Millisecond, time.Millisecond/2)
	if err != nil {
		t.Fatal(err)
	}
	sem, rw := semModel(t, 2), rwModel(t)
	type tally struct{ proved, illegal int }
	count := map[string]tally{}
	add := func(model string, v [2]Verdict) {
		c := count[model]
		if v[1] == Illegal {
			c.illegal++
			if v[0] == Illegal {
				c.proved++
			}
		}
		count[model] = c
	}
	models := []string{"register", "fenced", "kv", "lease", "lease-sim", "lease-wild", "semaphore", "rwlease", "fenced-sim"}
	for range n {
		add("register", relaxedAgrees(t, NewRegisterModel(0), genRegister(rng), limit))
		add("fenced", relaxedAgrees(t, NewFencedRegisterModel(0), genFenced(rng), limit))
		add("kv", relaxedAgrees(t, NewKVModel(), genKV(rng), limit))
		add("lease", relaxedAgrees(t, lease, genLease(rng), limit))
		add("lease-sim", relaxedAgrees(t, sim, genLeaseSmallSim(rng), limit))
		add("lease-wild", relaxedAgrees(t, lease, genLeaseWild(rng), limit))
		add("semaphore", relaxedAgrees(t, sem, genSemaphore(rng), limit))
		add("rwlease", relaxedAgrees(t, rw, genRW(rng), limit))
		fm, fh := genFenceSmallSim(rng)
		add("fenced-sim", relaxedAgrees(t, fm, fh, limit))
	}
	for _, model := range models {
		c := count[model]
		t.Logf("%s: the relaxed search proved %d of %d Illegal histories", model, c.proved, c.illegal)
		if c.illegal > 0 && c.proved == 0 {
			t.Errorf("%s: the relaxed search proved none of %d Illegal histories", model, c.illegal)
		}
	}
}
