package linearize

import "slices"

// shrink reduces ops, a non-linearizable sub-history whose search stopped
// at the operation blocker, to a sub-history that is 1-minimal among those
// that fail at the same operation: removing any single operation from the
// result makes it linearizable, or makes the search stop at a different
// operation. Holding on to the blocker keeps the counterexample about the
// same violation: without it, shrinking a double grant might end with a
// lone refused acquire, trivially wrong once the grant that explained it is
// gone.
//
// It tries, in order: dropping every operation called after the blocker
// returned; dropping whole clients; dropping chunks of halving size; then
// single operations until a full pass removes nothing. It stops early
// (minimal false) when the budget runs out or a trial search is
// inconclusive; what it returns is always confirmed non-linearizable.
func shrink[S, I, O any](m *filled[S, I, O], history []Operation[I, O], ops []int, blocker int, b *budget) (cex []int, minimal bool) {
	cur := slices.Clone(ops)
	inconclusive := false
	sr := getSearcher(m, history, b, nil)
	defer putSearcher(sr)
	fails := func(cand []int) bool {
		if b.out() {
			inconclusive = true
			return false
		}
		if blocker >= 0 && !slices.Contains(cand, blocker) {
			return false
		}
		sr.reset(cand)
		out := sr.run()
		switch out.verdict {
		case Illegal:
			return out.blocker == blocker
		case Unknown:
			inconclusive = true
		}
		return false
	}
	without := func(drop func(int) bool) []int {
		out := make([]int, 0, len(cur))
		for _, i := range cur {
			if !drop(i) {
				out = append(out, i)
			}
		}
		return out
	}

	if blocker >= 0 {
		end := history[blocker].Return
		if cand := without(func(i int) bool { return history[i].Call > end }); len(cand) < len(cur) && fails(cand) {
			cur = cand
		}
	}
	var clients []int
	for _, i := range cur {
		if c := history[i].ClientID; !slices.Contains(clients, c) {
			clients = append(clients, c)
		}
	}
	for _, c := range clients {
		if cand := without(func(i int) bool { return history[i].ClientID == c }); len(cand) < len(cur) && fails(cand) {
			cur = cand
		}
	}
	for size := len(cur) / 2; size >= 1; size /= 2 {
		for removed := true; removed; {
			removed = false
			for lo := 0; lo < len(cur); {
				hi := min(lo+size, len(cur))
				cand := append(slices.Clone(cur[:lo]), cur[hi:]...)
				if fails(cand) {
					cur, removed = cand, true
					continue
				}
				lo = hi
			}
			if size > 1 {
				break // one pass per chunk size; single operations run to a fixpoint
			}
		}
		if inconclusive {
			return cur, false
		}
	}
	return cur, !inconclusive
}
