package linearize

import (
	"context"
	"testing"
)

// registerRun is a sequential history of n register operations on one
// client (a write of i, then two reads of it), all correct; with bad, the
// last read returns a value never written.
func registerRun(n int, bad bool) []Operation[RegisterInput[int], RegisterOutput[int]] {
	h := make([]Operation[RegisterInput[int], RegisterOutput[int]], n)
	v := 0
	for i := range h {
		op := &h[i]
		op.ID, op.Call, op.Return = i, int64(2*i), int64(2*i+1)
		if i%3 == 0 {
			v = i
			op.Input = RegisterInput[int]{Op: Write, Value: v}
			continue
		}
		op.Input.Op = Read
		op.Output.Value = v
	}
	if bad {
		h[n-1].Input.Op, h[n-1].Output.Value = Read, -1
	}
	return h
}

// TestSmallCheckAllocs: with a model whose steps allocate nothing, a check
// allocates a few objects (the filled model, the budget, the partition,
// the witness), however long the history: the searcher's tables come from
// the previous check.
func TestSmallCheckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	m := NewRegisterModel(0)
	for _, n := range []int{60, 600} {
		for _, bad := range []bool{false, true} {
			h := registerRun(n, bad)
			check := func() {
				res, err := Check(context.Background(), m, h, Options{NoMinimize: true})
				if err != nil || (res.Verdict == Ok) == bad {
					t.Fatalf("%d operations, bad %v: verdict %v, err %v", n, bad, res.Verdict, err)
				}
			}
			check()
			// A collection during the runs may empty the pool once.
			if got := testing.AllocsPerRun(100, check); got > 8 {
				t.Errorf("%d operations, bad %v: %.1f allocations per check, want at most 8", n, bad, got)
			}
		}
	}
}

// TestPutSearcherDropsTheCheck: a searcher given back keeps its tables but
// nothing of the check (model, history, states), and one whose tables are
// big is not kept at all.
func TestPutSearcherDropsTheCheck(t *testing.T) {
	fm, err := fill(NewKVMapModel())
	if err != nil {
		t.Fatal(err)
	}
	h := loadKV(t, "c01-ok")
	b := newBudget(context.Background(), DefaultMaxMemory, 0)
	s := newSearcher(&fm, h, b, nil)
	s.reset(whole(h)[0].Ops)
	if out := s.run(); out.verdict != Ok {
		t.Fatalf("verdict %v, want Ok", out.verdict)
	}
	states, memoCap := s.states.states.n, len(s.memo.keyed)
	if states == 0 || memoCap == 0 {
		t.Fatalf("the search interned %d states in a memo of %d slots", states, memoCap)
	}
	putSearcher(s)
	if s.m != nil || s.hist != nil || s.ops != nil || s.b != nil || s.states.hash != nil || s.states.states.n != 0 {
		t.Errorf("an idle searcher still refers to the check: %+v", s)
	}
	for i := range states {
		if st := s.states.state(uint32(i)); st.Len() != 0 {
			t.Errorf("an idle searcher keeps state %d: %v", i, st)
		}
	}
	if len(s.memo.keyed) != memoCap {
		t.Errorf("the memo's slots went from %d to %d: they are kept for the next check", memoCap, len(s.memo.keyed))
	}

	big := newSearcher(&fm, h, b, nil)
	big.reset(whole(h)[0].Ops)
	big.memo.reset(poolMaxBytes, big.memo.words, false) // tables over the limit
	putSearcher(big)
	if big.m == nil {
		t.Error("a searcher with big tables was cleared for the pool; it should be dropped as it is")
	}
}
