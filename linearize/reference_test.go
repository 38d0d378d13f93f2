package linearize

// bruteCheck is the reference checker: it tries every order of the
// operations straight from the definition, with no memo and no list. An
// order is a linearization if it holds every known operation (unknown ones
// are optional), puts p before o whenever p returned before o was called
// (an unknown operation never returned), and the model accepts each step
// with some choice of next state. Exponential: tiny histories only.
func bruteCheck[S, I, O any](m Model[S, I, O], h []Operation[I, O]) bool {
	if m.Partition != nil {
		parts := map[string][]Operation[I, O]{}
		for _, op := range h {
			k := m.Partition(op.Input)
			parts[k] = append(parts[k], op)
		}
		for _, p := range parts {
			if !bruteSingle(m, p) {
				return false
			}
		}
		return true
	}
	return bruteSingle(m, h)
}

func bruteSingle[S, I, O any](m Model[S, I, O], h []Operation[I, O]) bool {
	used := make([]bool, len(h))
	var rec func(state S) bool
	rec = func(state S) bool {
		done := true
		for i := range h {
			if !used[i] && !h[i].Unknown {
				done = false
			}
		}
		if done {
			return true
		}
		for i := range h {
			if used[i] || !placeable(h, used, i) {
				continue
			}
			for _, next := range m.Step(nil, state, &h[i]) {
				used[i] = true
				ok := rec(next)
				used[i] = false
				if ok {
					return true
				}
			}
		}
		return false
	}
	return rec(m.Init())
}

// placeable: no operation left out so far must precede i in real time.
func placeable[I, O any](h []Operation[I, O], used []bool, i int) bool {
	for p := range h {
		if !used[p] && p != i && !h[p].Unknown && h[p].Return < h[i].Call {
			return false
		}
	}
	return true
}
