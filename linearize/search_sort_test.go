package linearize

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortReturns checks sortReturns, nearly sorted and shuffled, with
// ties, against a full sort.
func TestSortReturns(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for n := range 300 {
		ev := make([]event, n)
		for i := range ev {
			ev[i] = event{t: int64(i/2 + rng.IntN(1+n%7)), node: int32(2*i + 1)}
		}
		if n%3 == 0 {
			rng.Shuffle(n, func(i, j int) { ev[i], ev[j] = ev[j], ev[i] })
		}
		want := slices.Clone(ev)
		slices.SortFunc(want, func(a, b event) int {
			if a.t != b.t {
				return cmpInt64(a.t, b.t)
			}
			return int(a.node - b.node)
		})
		sortReturns(ev)
		if !slices.Equal(ev, want) {
			t.Fatalf("n=%d: %v, want %v", n, ev, want)
		}
	}
}
