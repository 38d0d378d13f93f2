package linearize

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

type rop = Operation[RegisterInput[int], RegisterOutput[int]]

func write(id, client int, call, ret int64, v int) rop {
	return rop{ID: id, ClientID: client, Call: call, Return: ret, Input: RegisterInput[int]{Op: Write, Value: v}}
}

func read(id, client int, call, ret int64, v int) rop {
	return rop{ID: id, ClientID: client, Call: call, Return: ret, Input: RegisterInput[int]{Op: Read}, Output: RegisterOutput[int]{Value: v}}
}

func unknownOp(o rop) rop { o.Unknown = true; o.Output = RegisterOutput[int]{}; return o }

// hardHistory: n writes of distinct values, all concurrent, then a read of
// a value nobody wrote. Illegal, but only after trying every subset of the
// writes: 2^n configurations.
func hardHistory(n int) []rop {
	var h []rop
	for i := range n {
		h = append(h, write(i, i, 0, 100, i+1))
	}
	return append(h, read(n, n, 200, 201, -1))
}

func TestRegisterBasics(t *testing.T) {
	m := NewRegisterModel(0)
	cases := []struct {
		name string
		h    []rop
		want Verdict
	}{
		{"empty", nil, Ok},
		{"read initial", []rop{read(1, 0, 0, 1, 0)}, Ok},
		{"read unwritten", []rop{read(1, 0, 0, 1, 5)}, Illegal},
		{"sequential", []rop{write(1, 0, 0, 1, 5), read(2, 0, 2, 3, 5)}, Ok},
		{"stale read", []rop{write(1, 0, 0, 1, 5), read(2, 1, 2, 3, 0)}, Illegal},
		{"concurrent read may see either", []rop{write(1, 0, 0, 10, 5), read(2, 1, 2, 3, 0), read(3, 2, 4, 5, 5)}, Ok},
		{"no going back", []rop{write(1, 0, 0, 10, 5), read(2, 1, 2, 3, 5), read(3, 2, 4, 5, 0)}, Illegal},
		{"closed intervals: touching ends are concurrent", []rop{write(1, 0, 0, 10, 5), read(2, 1, 10, 11, 0)}, Ok},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkWant(t, m, c.h, c.want)
		})
	}
}

// TestUnknownOutcomes pins the semantics of an operation whose outcome is
// unknown: it may be left out, or take effect at any one instant after its
// call, even after the client gave up; its output is not checked.
func TestUnknownOutcomes(t *testing.T) {
	m := NewRegisterModel(0)
	cases := []struct {
		name string
		h    []rop
		want Verdict
		// in: whether the witness linearization includes the unknown op
		in bool
	}{
		{"left out", []rop{unknownOp(write(1, 0, 0, 1, 5)), read(2, 1, 5, 6, 0)}, Ok, false},
		{"took effect", []rop{unknownOp(write(1, 0, 0, 1, 5)), read(2, 1, 5, 6, 5)}, Ok, true},
		{"took effect after the client gave up", []rop{
			unknownOp(write(1, 0, 0, 1, 5)), read(2, 1, 5, 6, 0), read(3, 1, 7, 8, 5)}, Ok, true},
		{"a known write could not", []rop{
			write(1, 0, 0, 1, 5), read(2, 1, 5, 6, 0), read(3, 1, 7, 8, 5)}, Illegal, false},
		{"not before its call", []rop{
			read(1, 1, 0, 1, 5), unknownOp(write(2, 0, 2, 3, 5))}, Illegal, false},
		{"at most once", []rop{
			unknownOp(write(1, 0, 0, 1, 5)), read(2, 1, 2, 3, 5), write(3, 2, 4, 5, 6), read(4, 1, 6, 7, 5)}, Illegal, false},
		{"its output is not checked", []rop{
			unknownOp(read(1, 0, 0, 1, 42)), read(2, 1, 2, 3, 0)}, Ok, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := check(t, m, c.h)
			if res.Verdict != c.want {
				t.Fatalf("verdict %v, want %v", res.Verdict, c.want)
			}
			if c.want == Ok {
				verifyLinearization(t, m, c.h, &res)
				if got := slices.Contains(res.Linearization()[0], 0); got != c.in {
					t.Fatalf("unknown op in the witness: %v, want %v (%v)", got, c.in, res.Linearization())
				}
			}
			if want := pcVerdict(bruteCheck(m, c.h)); want != c.want {
				t.Fatalf("reference says %v", want)
			}
		})
	}
}

func TestFencedRegister(t *testing.T) {
	m := NewFencedRegisterModel("")
	type fop = Operation[FencedInput[string], FencedOutput[string]]
	w := func(id int, call, ret int64, tok uint64, v string, ok bool) fop {
		return fop{ID: id, ClientID: id, Call: call, Return: ret,
			Input: FencedInput[string]{Op: Write, Token: tok, Value: v}, Output: FencedOutput[string]{OK: ok}}
	}
	peek := func(id int, call, ret int64, v string) fop {
		return fop{ID: id, ClientID: id, Call: call, Return: ret,
			Input: FencedInput[string]{Op: Peek}, Output: FencedOutput[string]{OK: true, Value: v}}
	}
	stale := []fop{w(1, 0, 1, 2, "new", true), w(2, 2, 3, 1, "old", true), peek(3, 4, 5, "old")}
	res := check(t, m, stale)
	if res.Verdict != Illegal {
		t.Fatalf("stale fenced write accepted: %v, want Illegal", res.Verdict)
	}
	if got := ids(stale, res.Counterexample); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("counterexample %v, want [1 2]", got)
	}
	assertMinimal(t, m, stale, res)
	rejected := []fop{w(1, 0, 1, 2, "new", true), w(2, 2, 3, 1, "old", false), peek(3, 4, 5, "new")}
	if got := check(t, m, rejected).Verdict; got != Ok {
		t.Fatalf("stale write rejected: %v, want Ok", got)
	}
	concurrent := []fop{w(1, 0, 10, 2, "new", true), w(2, 0, 10, 1, "old", true), peek(3, 11, 12, "new")}
	if got := check(t, m, concurrent).Verdict; got != Ok {
		t.Fatalf("concurrent writes, token 1 first: %v, want Ok", got)
	}
	wrongRefusal := []fop{w(1, 0, 1, 1, "a", true), w(2, 2, 3, 1, "b", false)}
	if got := check(t, m, wrongRefusal).Verdict; got != Illegal {
		t.Fatalf("equal token refused: %v, want Illegal", got)
	}
}

func TestBadInput(t *testing.T) {
	m := NewRegisterModel(0)
	ctx := context.Background()
	cases := []struct {
		name string
		err  error
		run  func() error
	}{
		{"return before call", ErrInvalidHistory, func() error {
			_, err := Check(ctx, m, []rop{write(1, 0, 5, 4, 1)}, Options{})
			return err
		}},
		{"duplicate ids", ErrInvalidHistory, func() error {
			_, err := Check(ctx, m, []rop{write(1, 0, 0, 1, 1), write(1, 1, 0, 1, 2)}, Options{})
			return err
		}},
		{"negative client", ErrInvalidHistory, func() error {
			_, err := Check(ctx, m, []rop{write(1, -1, 0, 1, 1)}, Options{})
			return err
		}},
		{"nil Init", ErrInvalidModel, func() error {
			bad := m
			bad.Init = nil
			_, err := Check(ctx, bad, nil, Options{})
			return err
		}},
		{"nil Step", ErrInvalidModel, func() error {
			bad := m
			bad.Step = nil
			_, err := Check(ctx, bad, nil, Options{})
			return err
		}},
		{"state needs Equal", ErrInvalidModel, func() error {
			_, err := Check(ctx, Model[[]int, int, int]{
				Init: func() []int { return nil },
				Step: func(dst [][]int, s []int, _ *Operation[int, int]) [][]int { return append(dst, s) },
			}, nil, Options{})
			return err
		}},
		{"state with interfaces needs Equal", ErrInvalidModel, func() error {
			type st struct{ v any }
			_, err := Check(ctx, Model[st, int, int]{
				Init: func() st { return st{v: nil} },
				Step: func(dst []st, s st, _ *Operation[int, int]) []st { return append(dst, s) },
			}, nil, Options{})
			return err
		}},
		{"negative time limit", ErrInvalidOptions, func() error {
			_, err := Check(ctx, m, nil, Options{TimeLimit: -1})
			return err
		}},
		{"negative step limit", ErrInvalidOptions, func() error {
			_, err := Check(ctx, m, nil, Options{MaxSteps: -1})
			return err
		}},
		{"lease ttl", ErrInvalidModel, func() error {
			_, err := NewLeaseModel(0, 0)
			return err
		}},
		{"lease tolerance", ErrInvalidModel, func() error {
			_, err := NewLeaseModel(time.Second, time.Second)
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.run()
			if !errors.Is(err, c.err) {
				t.Fatalf("error %v, want %v", err, c.err)
			}
			t.Log(err)
		})
	}
}

func TestComparableStateNeedsNoEqual(t *testing.T) {
	type st struct{ a, b int }
	m := Model[st, int, int]{
		Init: func() st { return st{} },
		Step: func(dst []st, s st, op *Operation[int, int]) []st {
			if op.Unknown || op.Output == s.a {
				return append(dst, st{a: op.Input, b: s.a})
			}
			return dst
		},
	}
	h := []Operation[int, int]{{ID: 1, Call: 0, Return: 1, Input: 1, Output: 0}, {ID: 2, Call: 2, Return: 3, Input: 2, Output: 1}}
	if got := check(t, m, h).Verdict; got != Ok {
		t.Fatalf("verdict %v, want Ok", got)
	}
	h[1].Output = 7
	if got := check(t, m, h).Verdict; got != Illegal {
		t.Fatalf("verdict %v, want Illegal", got)
	}
}

func TestBudgetsGiveUnknown(t *testing.T) {
	m := NewRegisterModel(0)
	h := hardHistory(26)
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := Check(ctx, m, h, Options{})
		if err != nil || res.Verdict != Unknown || !errors.Is(res.Cause, context.Canceled) {
			t.Fatalf("verdict %v cause %v err %v, want Unknown/Canceled", res.Verdict, res.Cause, err)
		}
	})
	t.Run("context deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		res, err := Check(ctx, m, h, Options{})
		if err != nil || res.Verdict != Unknown || !errors.Is(res.Cause, context.DeadlineExceeded) {
			t.Fatalf("verdict %v cause %v err %v, want Unknown/DeadlineExceeded", res.Verdict, res.Cause, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("took %v to notice the deadline", d)
		}
	})
	t.Run("time limit", func(t *testing.T) {
		res, err := Check(context.Background(), m, h, Options{TimeLimit: 50 * time.Millisecond})
		if err != nil || res.Verdict != Unknown || !errors.Is(res.Cause, ErrTimeLimit) {
			t.Fatalf("verdict %v cause %v err %v, want Unknown/ErrTimeLimit", res.Verdict, res.Cause, err)
		}
	})
	t.Run("memory cap", func(t *testing.T) {
		res, err := Check(context.Background(), m, h, Options{MaxMemory: 1 << 20})
		if err != nil || res.Verdict != Unknown || !errors.Is(res.Cause, ErrMemoryLimit) {
			t.Fatalf("verdict %v cause %v err %v, want Unknown/ErrMemoryLimit", res.Verdict, res.Cause, err)
		}
	})
	t.Run("step limit", func(t *testing.T) {
		var states []int
		for range 2 {
			res, err := Check(context.Background(), m, h, Options{MaxSteps: 20_000, Workers: 1})
			if err != nil || res.Verdict != Unknown || !errors.Is(res.Cause, ErrStepLimit) {
				t.Fatalf("verdict %v cause %v err %v, want Unknown/ErrStepLimit", res.Verdict, res.Cause, err)
			}
			if res.Steps <= 20_000 {
				t.Fatalf("Steps %d, want past the limit of 20000", res.Steps)
			}
			states = append(states, res.Partitions[0].States)
		}
		if states[0] != states[1] || states[0] == 0 {
			t.Fatalf("states searched under one step limit: %v, want the same non-zero count twice", states)
		}
	})
	t.Run("small enough to finish", func(t *testing.T) {
		res, err := Check(context.Background(), m, hardHistory(10), Options{TimeLimit: decideLimit, MaxMemory: 64 << 20})
		if err != nil || res.Verdict != Illegal {
			t.Fatalf("verdict %v cause %v err %v, want Illegal", res.Verdict, res.Cause, err)
		}
		if got := ids(hardHistory(10), res.Counterexample); !slices.Equal(got, []int{10}) {
			t.Fatalf("counterexample %v, want the read alone", got)
		}
	})
	t.Run("steps enough to finish and shrink", func(t *testing.T) {
		res, err := Check(context.Background(), m, hardHistory(10), Options{MaxSteps: 50_000_000, Workers: 1})
		if err != nil || res.Verdict != Illegal || !res.Minimal {
			t.Fatalf("verdict %v minimal %v cause %v err %v, want Illegal and minimal", res.Verdict, res.Minimal, res.Cause, err)
		}
	})
}

func TestIllegalStopsOtherPartitions(t *testing.T) {
	// One bad key, one very hard (but fine) key: the bad one ends the check.
	kv := NewKVModel()
	var h []Operation[KVInput, KVOutput]
	for i := range 40 {
		h = append(h, Operation[KVInput, KVOutput]{ID: i, ClientID: i, Call: 0, Return: 100,
			Input: KVInput{Op: Append, Key: "hard", Value: strings.Repeat("x", i%3+1)}})
	}
	h = append(h, Operation[KVInput, KVOutput]{ID: 100, ClientID: 100, Call: 200, Return: 201,
		Input: KVInput{Op: Get, Key: "hard"}, Output: KVOutput{Value: "nope"}})
	h = append(h, Operation[KVInput, KVOutput]{ID: 101, ClientID: 101, Call: 0, Return: 1,
		Input: KVInput{Op: Get, Key: "bad"}, Output: KVOutput{Value: "ghost"}})
	res, err := Check(context.Background(), kv, h, Options{TimeLimit: decideLimit})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Illegal || res.Partitions[res.FailingPartition].Key != "bad" {
		t.Fatalf("verdict %v, failing partition %d", res.Verdict, res.FailingPartition)
	}
	if res.Elapsed > 20*time.Second {
		t.Fatalf("took %v", res.Elapsed)
	}
}

// TestWordBoundaries: partitions whose sizes sit at the bitset's word
// boundaries, linearized to the last operation, with and without windowed
// memo entries (a chain of overlapping pairs, and everything concurrent).
func TestWordBoundaries(t *testing.T) {
	m := NewRegisterModel(0)
	for _, n := range []int{63, 64, 65, 127, 128, 129, 192, 193} {
		for _, shape := range []string{"sequential", "pairs", "unknown last"} {
			var h []rop
			for i := range n {
				call, ret := int64(2*i), int64(2*i+1)
				if shape == "pairs" {
					ret = int64(2*i + 2) // touches the next call: concurrent
				}
				h = append(h, write(i, i, call, ret, i+1))
			}
			if shape == "unknown last" {
				h[n-1] = unknownOp(h[n-1])
			}
			last := n // the value the last known write leaves
			if shape == "unknown last" {
				last = n - 1
			}
			ok := append(slices.Clone(h), read(n, n, int64(2*n+10), int64(2*n+11), last))
			if shape == "unknown last" {
				ok[len(ok)-1].Output.Value = n // the unknown write took effect
			}
			bad := append(slices.Clone(h), read(n, n, int64(2*n+10), int64(2*n+11), -1))
			for _, c := range []struct {
				h    []rop
				want Verdict
			}{{h, Ok}, {ok, Ok}, {bad, Illegal}} {
				res := check(t, m, c.h)
				if res.Verdict != c.want {
					t.Fatalf("%d ops, %s: verdict %v, want %v", len(c.h), shape, res.Verdict, c.want)
				}
				if res.Verdict == Ok {
					verifyLinearization(t, m, c.h, &res)
				}
			}
		}
	}
}
