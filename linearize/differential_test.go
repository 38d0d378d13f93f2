package linearize

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

var seedFlag = flag.Uint64("seed", 0, "replay the random tests from this seed (0: a new seed)")

// testSeed returns the seed of a random test and logs it for replay.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test -run '%s' ./linearize/ -args -seed=%d)", seed, t.Name(), seed)
	return seed
}

func deep() bool { return os.Getenv("LOCKPROOF_DEEP") != "" }

// toPorcupine gives porcupine the same model and history: inputs are
// indices into h, the model's Step is wrapped as a nondeterministic step,
// and an unknown outcome is porcupine's way of saying it: a return after
// every other event, with the option of changing nothing (leaving it out).
func toPorcupine[S, I, O any](m Model[S, I, O], h []Operation[I, O]) (porcupine.Model, []porcupine.Operation) {
	end := int64(0)
	for _, op := range h {
		end = max(end, op.Call+1, op.Return+1)
	}
	ops := make([]porcupine.Operation, len(h))
	for i, op := range h {
		ret := op.Return
		if op.Unknown {
			ret = end
		}
		ops[i] = porcupine.Operation{ClientId: op.ClientID, Call: op.Call, Return: ret, Input: i}
	}
	nm := porcupine.NondeterministicModel{
		Init: func() []interface{} { return []interface{}{m.Init()} },
		Step: func(state, input, _ interface{}) []interface{} {
			op := &h[input.(int)]
			var out []interface{}
			for _, s := range m.Step(nil, state.(S), op) {
				out = append(out, s)
			}
			if op.Unknown {
				out = append(out, state)
			}
			return out
		},
		Equal: func(a, b interface{}) bool { return m.Equal(a.(S), b.(S)) },
	}
	if m.Partition != nil {
		nm.Partition = func(hist []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range hist {
				k := m.Partition(h[op.Input.(int)].Input)
				if _, ok := byKey[k]; !ok {
					keys = append(keys, k)
				}
				byKey[k] = append(byKey[k], op)
			}
			var parts [][]porcupine.Operation
			for _, k := range keys {
				parts = append(parts, byKey[k])
			}
			return parts
		}
	}
	return nm.ToModel(), ops
}

// randomTimes gives n operations random overlapping intervals.
func randomTimes(rng *rand.Rand, n int) [][2]int64 {
	t := make([][2]int64, n)
	for i := range t {
		c := rng.Int64N(3 * int64(n))
		t[i] = [2]int64{c, c + rng.Int64N(6)}
	}
	return t
}

func genRegister(rng *rand.Rand) []Operation[RegisterInput[int], RegisterOutput[int]] {
	n := 1 + rng.IntN(7)
	times := randomTimes(rng, n)
	h := make([]Operation[RegisterInput[int], RegisterOutput[int]], n)
	for i := range h {
		op := &h[i]
		*op = Operation[RegisterInput[int], RegisterOutput[int]]{ID: i, ClientID: i, Call: times[i][0], Return: times[i][1]}
		if rng.IntN(2) == 0 {
			op.Input = RegisterInput[int]{Op: Write, Value: rng.IntN(3)}
		} else {
			op.Input = RegisterInput[int]{Op: Read}
			op.Output.Value = rng.IntN(3)
		}
		op.Unknown = rng.IntN(5) == 0
	}
	return h
}

func genFenced(rng *rand.Rand) []Operation[FencedInput[int], FencedOutput[int]] {
	n := 1 + rng.IntN(7)
	times := randomTimes(rng, n)
	h := make([]Operation[FencedInput[int], FencedOutput[int]], n)
	for i := range h {
		op := &h[i]
		*op = Operation[FencedInput[int], FencedOutput[int]]{ID: i, ClientID: i, Call: times[i][0], Return: times[i][1]}
		op.Input = FencedInput[int]{Op: RegisterOp(1 + rng.IntN(3)), Token: uint64(rng.IntN(4)), Value: rng.IntN(3)}
		op.Output = FencedOutput[int]{OK: rng.IntN(4) > 0, Value: rng.IntN(3)}
		op.Unknown = rng.IntN(5) == 0
	}
	return h
}

func genKV(rng *rand.Rand) []Operation[KVInput, KVOutput] {
	n := 1 + rng.IntN(8)
	times := randomTimes(rng, n)
	keys := []string{"x", "y"}
	vals := []string{"", "a", "b", "ab", "ba"}
	h := make([]Operation[KVInput, KVOutput], n)
	for i := range h {
		op := &h[i]
		*op = Operation[KVInput, KVOutput]{ID: i, ClientID: i, Call: times[i][0], Return: times[i][1]}
		op.Input = KVInput{Op: KVOp(1 + rng.IntN(3)), Key: keys[rng.IntN(2)], Value: vals[1+rng.IntN(2)]}
		op.Output.Value = vals[rng.IntN(len(vals))]
		op.Unknown = rng.IntN(6) == 0
	}
	return h
}

func genLease(rng *rand.Rand) []Operation[LeaseInput, LeaseOutput] {
	n := 1 + rng.IntN(7)
	h := make([]Operation[LeaseInput, LeaseOutput], n)
	for i := range h {
		op := &h[i]
		c := rng.Int64N(30)
		*op = Operation[LeaseInput, LeaseOutput]{ID: i, ClientID: i, Call: c, Return: c + rng.Int64N(12)}
		op.Input = LeaseInput{Lock: "L", Op: LeaseOp(1 + rng.IntN(3)), Owner: uint64(1 + rng.IntN(3))}
		if rng.IntN(4) == 0 {
			op.Input.Lock = "M"
		}
		op.Output = LeaseOutput{OK: rng.IntN(3) > 0, Token: uint64(1 + rng.IntN(4))}
		op.Unknown = rng.IntN(5) == 0
	}
	return h
}

// smallLeaseModel has a TTL of 10 time units, tolerance 1, on the small
// integer times of the random histories.
func smallLeaseModel(tb testing.TB) Model[LeaseState, LeaseInput, LeaseOutput] {
	tb.Helper()
	m, err := NewLeaseModel(10, 1)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// agree checks one history with Check, porcupine and the reference, and
// returns Check's verdict.
func agree[S, I, O any](t *testing.T, m Model[S, I, O], h []Operation[I, O]) Verdict {
	t.Helper()
	res, err := Check(context.Background(), m, h, Options{NoMinimize: true, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	pm, ph := toPorcupine(m, h)
	pc := pcVerdict(porcupine.CheckOperations(pm, ph))
	ref := pcVerdict(bruteCheck(m, h))
	if res.Verdict != pc || res.Verdict != ref {
		var b []byte
		w := &byteWriter{&b}
		_ = EncodeHistory(w, h)
		t.Fatalf("lockproof %v, porcupine %v, reference %v on\n%s", res.Verdict, pc, ref, b)
	}
	if res.Verdict == Ok {
		verifyLinearization(t, m, h, &res)
	}
	return res.Verdict
}

type byteWriter struct{ b *[]byte }

func (w *byteWriter) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }

// verifyLinearization replays the witness of an Ok result: every known
// operation once, real-time order kept, every step accepted by the model.
func verifyLinearization[S, I, O any](tb testing.TB, m Model[S, I, O], h []Operation[I, O], res *Result) {
	tb.Helper()
	seen := map[int]bool{}
	for p, lin := range res.Linearization() {
		states := []S{m.Init()}
		// laterRet[pos]: the earliest return of a known operation placed
		// after pos (a scan per operation is quadratic on long histories).
		laterRet := make([]int64, len(lin)+1)
		laterRet[len(lin)] = math.MaxInt64
		for pos := len(lin) - 1; pos >= 0; pos-- {
			laterRet[pos] = laterRet[pos+1]
			if op := &h[lin[pos]]; !op.Unknown {
				laterRet[pos] = min(laterRet[pos], op.Return)
			}
		}
		for pos, i := range lin {
			if seen[i] {
				tb.Fatalf("operation %d linearized twice", i)
			}
			seen[i] = true
			if laterRet[pos+1] < h[i].Call {
				for _, j := range lin[pos+1:] {
					if !h[j].Unknown && h[j].Return < h[i].Call {
						tb.Fatalf("partition %d: op %d placed before op %d, which returned before it was called", p, i, j)
					}
				}
			}
			var next []S
			for _, s := range states {
				next = m.Step(next, s, &h[i])
			}
			if len(next) == 0 {
				tb.Fatalf("partition %d: the model refuses op %d at position %d", p, i, pos)
			}
			states = next
		}
	}
	for i := range h {
		if !h[i].Unknown && !seen[i] {
			tb.Fatalf("known operation %d missing from the linearization", i)
		}
	}
}

func TestDifferentialPorcupine(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	n := 2500 // per model: 10,000 histories
	if deep() {
		n = 50_000
	}
	lease := smallLeaseModel(t)
	count := map[string][3]int{}
	tally := func(model string, v Verdict) {
		c := count[model]
		c[v]++
		count[model] = c
	}
	for range n {
		tally("register", agree(t, NewRegisterModel(0), genRegister(rng)))
		tally("fenced", agree(t, NewFencedRegisterModel(0), genFenced(rng)))
		tally("kv", agree(t, NewKVModel(), genKV(rng)))
		tally("lease", agree(t, lease, genLease(rng)))
	}
	for model, c := range count {
		t.Logf("%s: %d Ok, %d Illegal", model, c[Ok], c[Illegal])
		if c[Ok] < n/20 || c[Illegal] < n/20 {
			t.Errorf("%s: verdicts too one-sided to compare (%d Ok, %d Illegal)", model, c[Ok], c[Illegal])
		}
	}
}

// simKV simulates clients of a linearizable key-value store: each
// operation takes effect at a random instant within its interval (an
// unknown one, at its instant or never), so the history is linearizable;
// with corrupt, one get is then given a wrong output, which usually makes
// it not. Partitions run to a few hundred operations, several words of
// bitset, with windows in the memo. One operation in unknownOneIn has an
// unknown outcome.
func simKV(rng *rand.Rand, corrupt bool, unknownOneIn int) []Operation[KVInput, KVOutput] {
	keys := []string{"x", "y", "z"}[:1+rng.IntN(3)]
	clients := 2 + rng.IntN(4)
	n := 60 + rng.IntN(300)
	if unknownOneIn < 10 {
		n = 20 + rng.IntN(60) // porcupine is slow with many unknown outcomes
	}
	type ev struct {
		at int64
		i  int
	}
	var (
		h      []Operation[KVInput, KVOutput]
		order  []ev
		free   = make([]int64, clients)
		effect []bool
	)
	for i := range n {
		c := rng.IntN(clients)
		call := free[c] + rng.Int64N(3)
		ret := call + rng.Int64N(8)
		free[c] = ret + 1
		in := KVInput{Op: KVOp(1 + rng.IntN(3)), Key: keys[rng.IntN(len(keys))]}
		if in.Op != Get {
			in.Value = string(rune('a' + rng.IntN(3)))
		}
		op := Operation[KVInput, KVOutput]{ID: i, ClientID: c, Call: call, Return: ret, Input: in}
		op.Unknown = rng.IntN(unknownOneIn) == 0
		effect = append(effect, !op.Unknown || rng.IntN(2) == 0)
		if op.Unknown {
			free[c] = ret + 1 + rng.Int64N(20) // the client gave up, then went on
		}
		h = append(h, op)
		// The effect is at call+2x/2 for x in [0, ret-call]: within the
		// interval, and at a half step so that ties are rare.
		order = append(order, ev{2*call + rng.Int64N(2*(ret-call)+1), i})
	}
	slices.SortFunc(order, func(a, b ev) int { return cmpInt64(a.at, b.at) })
	state := map[string]string{}
	for _, e := range order {
		op := &h[e.i]
		if !effect[e.i] {
			continue
		}
		switch op.Input.Op {
		case Get:
			op.Output.Value = state[op.Input.Key]
		case Put:
			state[op.Input.Key] = op.Input.Value
		case Append:
			state[op.Input.Key] += op.Input.Value
		}
	}
	if corrupt {
		var gets []int
		for i := range h {
			if h[i].Input.Op == Get && !h[i].Unknown {
				gets = append(gets, i)
			}
		}
		if len(gets) > 0 {
			h[gets[rng.IntN(len(gets))]].Output.Value += string(rune('a' + rng.IntN(3)))
		}
	}
	return h
}

// TestDifferentialLargeKV compares lockproof (one worker, so that one
// searcher takes partition after partition, and the default pool) with
// porcupine on simulated key-value histories of hundreds of operations:
// 150 of them by default (each seed draws new ones), 5000 with
// LOCKPROOF_DEEP.
func TestDifferentialLargeKV(t *testing.T) {
	differentialSimKV(t, 2, 80, 150, 5000)
}

// TestDifferentialManyUnknown does the same on shorter histories where one
// operation in three has an unknown outcome: the search's pruning of
// unknown operations without effect (see searcher.try) is busiest there.
func TestDifferentialManyUnknown(t *testing.T) {
	differentialSimKV(t, 3, 3, 50, 500)
}

// differentialSimKV compares n histories of simKV (deepN with
// LOCKPROOF_DEEP), half of them corrupted.
func differentialSimKV(t *testing.T, stream uint64, unknownOneIn, n, deepN int) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, stream))
	limit := time.Second // porcupine's time limit
	if deep() {
		n, limit = deepN, 10*time.Second
	}
	m := NewKVModel()
	var count [3]int
	for i := range n {
		h := simKV(rng, i%2 == 1, unknownOneIn)
		pm, ph := toPorcupine(m, h)
		pc := porcupine.CheckOperationsTimeout(pm, ph, limit)
		if pc == porcupine.Unknown {
			continue // too hard for porcupine (unknown outcomes)
		}
		want := pcVerdict(pc == porcupine.Ok)
		for _, workers := range []int{1, 0} {
			res, err := Check(context.Background(), m, h, Options{NoMinimize: true, Workers: workers})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != want {
				var b []byte
				_ = EncodeHistory(&byteWriter{&b}, h)
				t.Fatalf("history %d, %d workers: lockproof %v, porcupine %v on\n%s", i, workers, res.Verdict, want, b)
			}
			if res.Verdict == Ok {
				verifyLinearization(t, m, h, &res)
			}
		}
		count[want]++
	}
	t.Logf("%d Ok, %d Illegal", count[Ok], count[Illegal])
	if count[Ok] < n/10 || count[Illegal] < n/10 {
		t.Errorf("verdicts too one-sided to compare (%d Ok, %d Illegal)", count[Ok], count[Illegal])
	}
}

// TestReadHashIsAShortcut checks that Model.ReadHash changes no verdict:
// the models that declare it against the same models without it, on random
// small histories and on simulated key-value ones.
func TestReadHashIsAShortcut(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 4))
	n := 1000
	if deep() {
		n = 20_000
	}
	kv, reg := NewKVModel(), NewRegisterModel(0)
	kvPlain, regPlain := kv, reg
	kvPlain.ReadHash, regPlain.ReadHash = nil, nil
	for i := range n {
		sameVerdict(t, kv, kvPlain, genKV(rng))
		sameVerdict(t, reg, regPlain, genRegister(rng))
		if i%10 == 0 {
			sameVerdict(t, kv, kvPlain, simKV(rng, i%20 == 0, 80))
		}
	}
}

func sameVerdict[S, I, O any](t *testing.T, with, without Model[S, I, O], h []Operation[I, O]) {
	t.Helper()
	a, err := Check(context.Background(), with, h, Options{NoMinimize: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Check(context.Background(), without, h, Options{NoMinimize: true})
	if err != nil {
		t.Fatal(err)
	}
	if a.Verdict != b.Verdict {
		var buf []byte
		_ = EncodeHistory(&byteWriter{&buf}, h)
		t.Fatalf("with ReadHash %v, without %v on\n%s", a.Verdict, b.Verdict, buf)
	}
	if a.Verdict == Ok {
		verifyLinearization(t, with, h, &a)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the failure and ends
// the check by a panic that rejects recovers.
type fatalRecorder struct {
	testing.TB
	msg string
}

type recordedFatal struct{}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(recordedFatal{})
}

// rejects reports the message with which verifyLinearization rejects res
// as a witness of h, or "" if it accepts it.
func rejects(tb testing.TB, m Model[LeaseState, LeaseInput, LeaseOutput], h []lop, res Result) (msg string) {
	f := &fatalRecorder{TB: tb}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(recordedFatal); !ok {
				panic(r)
			}
			msg = f.msg
		}
	}()
	verifyLinearization(f, m, h, &res)
	return ""
}

// TestVerifyLinearization checks the checker of witnesses: a witness that
// keeps real-time order and the model passes; one that places an
// operation before another that returned before it was called, one the
// model refuses, and one that leaves out a known operation fail.
func TestVerifyLinearization(t *testing.T) {
	m := leaseModel(t)
	h := []lop{
		acquire(0, 0, 1, 0, 1, 1),
		leaseCall(1, 0, Release, 1, 2, 3, true),
		acquire(2, 1, 2, 4, 5, 2),
	}
	witness := func(order ...int) Result {
		return Result{Verdict: Ok, Partitions: []Partition{{Key: "L", Verdict: Ok, Linearization: order}}}
	}
	if msg := rejects(t, m, h, witness(0, 1, 2)); msg != "" {
		t.Fatalf("a valid witness rejected: %s", msg)
	}
	for _, c := range []struct {
		order []int
		want  string
	}{
		{[]int{0, 2, 1}, "returned before it was called"},
		{[]int{2, 0, 1}, "returned before it was called"},
		{[]int{0, 1}, "missing"},
	} {
		if msg := rejects(t, m, h, witness(c.order...)); !strings.Contains(msg, c.want) {
			t.Errorf("witness %v: rejection %q, want one that says %q", c.order, msg, c.want)
		}
	}
	// Two concurrent grants of one token: real-time order allows either
	// order, the model neither.
	twice := []lop{acquire(0, 0, 1, 0, 10, 1), acquire(1, 1, 2, 0, 10, 1)}
	if msg := rejects(t, m, twice, witness(1, 0)); !strings.Contains(msg, "refuses") {
		t.Errorf("a witness the model refuses: rejection %q", msg)
	}
}
