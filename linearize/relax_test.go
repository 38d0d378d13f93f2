package linearize

import (
	"math/rand/v2"
	"testing"
	"time"
)

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
