package linearize

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The benchmarks run lockproof and porcupine on the same histories, as
// sub-benchmarks of one benchmark, so that ratios come from one run:
//
//	go test -run '^$' -bench . -benchmem -count 5 -timeout 1800s ./linearize/
//
// porcupine gets the same histories as []porcupine.Operation and models with
// the same semantics written for its interface{} API (below).

// pcKV is porcupine's view of the key-value histories.
type pcKVIn struct {
	op         KVOp
	key, value string
}

func pcKVHistory(h []Operation[KVInput, KVOutput]) []porcupine.Operation {
	out := make([]porcupine.Operation, len(h))
	for i, op := range h {
		out[i] = porcupine.Operation{
			ClientId: op.ClientID, Call: op.Call, Return: op.Return,
			Input:  pcKVIn{op: op.Input.Op, key: op.Input.Key, value: op.Input.Value},
			Output: op.Output.Value,
		}
	}
	return out
}

func fnvString(s string) uint64 {
	f := fnv.New64a()
	f.Write([]byte(s))
	return f.Sum64()
}

// pcKVStep applies one key-value operation to a value.
func pcKVStep(st string, in pcKVIn, out string) (bool, string) {
	switch in.op {
	case Get:
		return out == st, st
	case Put:
		return true, in.value
	default:
		return true, st + in.value
	}
}

var pcKVModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(pcKVIn).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		parts := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() interface{} { return "" },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		return pcKVStep(state.(string), input.(pcKVIn), output.(string))
	},
	Hash: func(state interface{}) uint64 { return fnvString(state.(string)) },
}

var pcKVMapModel = porcupine.Model{
	Init: func() interface{} { return map[string]string{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		st, in := state.(map[string]string), input.(pcKVIn)
		ok, v := pcKVStep(st[in.key], in, output.(string))
		if !ok || in.op == Get {
			return ok, st
		}
		next := maps.Clone(st)
		next[in.key] = v
		return true, next
	},
	Equal: func(a, b interface{}) bool { return maps.Equal(a.(map[string]string), b.(map[string]string)) },
	Hash: func(state interface{}) uint64 {
		var h uint64
		for k, v := range state.(map[string]string) {
			h ^= fnvString(k + "\x00" + v)
		}
		return h
	},
}

// pcEtcd is porcupine's view of the etcd histories: an unknown outcome is a
// return after the last event whose output the model accepts whatever it
// is, which is equivalent to an optional operation.
type pcEtcdOut struct {
	out     etcdOut
	unknown bool
}

func pcEtcdHistory(h []Operation[etcdIn, etcdOut]) []porcupine.Operation {
	end := int64(0)
	for _, op := range h {
		end = max(end, op.Return+1)
	}
	out := make([]porcupine.Operation, len(h))
	for i, op := range h {
		ret := op.Return
		if op.Unknown {
			ret = end
		}
		out[i] = porcupine.Operation{ClientId: op.ClientID, Call: op.Call, Return: ret,
			Input: op.Input, Output: pcEtcdOut{out: op.Output, unknown: op.Unknown}}
	}
	return out
}

var pcEtcdModel = porcupine.Model{
	Init: func() interface{} { return etcdState{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s, in, o := state.(etcdState), input.(etcdIn), output.(pcEtcdOut)
		switch in.Op {
		case "read":
			return o.unknown || o.out.Exists == s.Set && (!s.Set || o.out.Value == s.Value), s
		case "write":
			return true, etcdState{Set: true, Value: in.Arg}
		default:
			match := s.Set && s.Value == in.Arg
			next := s
			if match {
				next = etcdState{Set: true, Value: in.New}
			}
			return o.unknown || o.out.OK == match, next
		}
	},
}

func pcVerdict(ok bool) Verdict {
	if ok {
		return Ok
	}
	return Illegal
}

func benchPair[S, I, O any](b *testing.B, want Verdict, model Model[S, I, O], h []Operation[I, O], pm porcupine.Model, ph []porcupine.Operation) {
	b.Run("lockproof", func(b *testing.B) { benchCheck(b, want, model, h) })
	b.Run("porcupine", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if got := pcVerdict(porcupine.CheckOperations(pm, ph)); got != want {
				b.Fatalf("porcupine verdict %v; want %v", got, want)
			}
		}
	})
}

// reportCPU starts counting the process's CPU time (user and system, every
// thread: the collector's work too); the function it returns reports it
// per operation as cpu-ns/op. On a machine shared with other jobs a
// benchmark's wall time includes the time it waited for a core, which
// CPU time does not.
func reportCPU(b *testing.B) func() {
	start := cpuTime(b)
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// cpuTime is the process's user and system time so far, in nanoseconds.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// benchCheck times Check of h (default options, no shrinking), which must
// say want.
func benchCheck[S, I, O any](b *testing.B, want Verdict, model Model[S, I, O], h []Operation[I, O]) {
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		res, err := Check(context.Background(), model, h, Options{NoMinimize: true})
		if err != nil || res.Verdict != want {
			b.Fatalf("verdict %v, err %v; want %v", res.Verdict, err, want)
		}
	}
}

func BenchmarkKV(b *testing.B) {
	for _, lg := range kvLogs {
		if lg.name == "c01-ok" || lg.name == "c01-bad" {
			continue
		}
		h := loadKV(b, lg.name)
		want := pcVerdict(lg.ok)
		b.Run(lg.name, func(b *testing.B) {
			benchPair(b, want, NewKVModel(), h, pcKVModel, pcKVHistory(h))
		})
	}
}

func BenchmarkKVNoPartition(b *testing.B) {
	for _, lg := range kvLogs {
		if lg.name == "c50-ok" || lg.name == "c50-bad" {
			continue // porcupine takes more than minutes on these
		}
		h := loadKV(b, lg.name)
		want := pcVerdict(lg.ok)
		b.Run(lg.name, func(b *testing.B) {
			benchPair(b, want, NewKVMapModel(), h, pcKVMapModel, pcKVHistory(h))
		})
	}
}

// BenchmarkEtcd checks the whole Jepsen etcd set (102 logs) per iteration.
func BenchmarkEtcd(b *testing.B) {
	type log struct {
		h    []Operation[etcdIn, etcdOut]
		ph   []porcupine.Operation
		want Verdict
	}
	var logs []log
	for _, n := range etcdLogs() {
		h := loadEtcd(b, n)
		logs = append(logs, log{h, pcEtcdHistory(h), pcVerdict(etcdLinearizable[n])})
	}
	b.Run("lockproof", func(b *testing.B) {
		b.ReportAllocs()
		m := etcdModel()
		for b.Loop() {
			for _, l := range logs {
				res, err := Check(context.Background(), m, l.h, Options{NoMinimize: true})
				if err != nil || res.Verdict != l.want {
					b.Fatalf("verdict %v, err %v; want %v", res.Verdict, err, l.want)
				}
			}
		}
	})
	b.Run("porcupine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, l := range logs {
				if got := pcVerdict(porcupine.CheckOperations(pcEtcdModel, l.ph)); got != l.want {
					b.Fatalf("porcupine verdict %v; want %v", got, l.want)
				}
			}
		}
	})
}

// lock100k is the generated lease-lock history of the performance target:
// 100,000 operations, 64 clients, 100 locks, 5% unknown outcomes.
func lock100k() []Operation[LeaseInput, LeaseOutput] {
	return lockGen{seed: 1, ops: 100_000, clients: 64, keys: 100, unknownFrac: 0.05, ttl: 5 * time.Millisecond}.generate()
}

func BenchmarkLock100k(b *testing.B) {
	h := lock100k()
	m, err := NewLeaseModel(5*time.Millisecond, 0)
	if err != nil {
		b.Fatal(err)
	}
	pm, ph := toPorcupine(m, h)
	benchPair(b, Ok, m, h, pm, ph)
}

// simBatch is a set of simulated histories of one class, each with its
// verdict and porcupine's view of it, for BenchmarkLeaseSim and
// BenchmarkFenceSim.
type simBatch[I, O any] struct {
	h     [][]Operation[I, O]
	ph    [][]porcupine.Operation
	pm    []porcupine.Model
	want  []Verdict
	pcOk  []bool // porcupine decides it within the batch's limit
	nPcOk int
}

// simBatchOf generates n histories (gen(i) returns the i-th and its
// verdict) and marks those porcupine decides within pcLimit: both
// checkers are timed on those, and lockproof on all of them too.
func simBatchOf[S, I, O any](m Model[S, I, O], n int, pcLimit time.Duration, gen func(i int) ([]Operation[I, O], Verdict)) simBatch[I, O] {
	var lb simBatch[I, O]
	for i := range n {
		h, want := gen(i)
		pm, ph := toPorcupine(m, h)
		ok := porcupine.CheckOperationsTimeout(pm, ph, pcLimit) != porcupine.Unknown
		lb.h, lb.ph, lb.pm, lb.want, lb.pcOk = append(lb.h, h), append(lb.ph, ph), append(lb.pm, pm), append(lb.want, want), append(lb.pcOk, ok)
		if ok {
			lb.nPcOk++
		}
	}
	return lb
}

// benchBatch runs b's sub-benchmarks on lb: "decided-N", the N histories
// porcupine decides within the batch's limit, checked by lockproof as
// propertytest runs it (shrinking included), without shrinking, and by
// porcupine; "all-N/lockproof", lockproof on the whole batch.
func benchBatch[S, I, O any](b *testing.B, m Model[S, I, O], lb *simBatch[I, O]) {
	run := func(b *testing.B, pcOnly, nomin bool) {
		b.ReportAllocs()
		for b.Loop() {
			for i, h := range lb.h {
				if pcOnly && !lb.pcOk[i] {
					continue
				}
				res, err := Check(context.Background(), m, h, Options{NoMinimize: nomin, Workers: 1})
				if err != nil || res.Verdict != lb.want[i] {
					b.Fatalf("history %d: verdict %v, err %v; want %v", i, res.Verdict, err, lb.want[i])
				}
			}
		}
	}
	if lb.nPcOk > 0 {
		b.Run(fmt.Sprintf("decided-%d", lb.nPcOk), func(b *testing.B) {
			b.Run("lockproof", func(b *testing.B) { run(b, true, false) })
			b.Run("lockproof-nominimize", func(b *testing.B) { run(b, true, true) })
			b.Run("porcupine", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					for i := range lb.h {
						if !lb.pcOk[i] {
							continue
						}
						if got := pcVerdict(porcupine.CheckOperations(lb.pm[i], lb.ph[i])); got != lb.want[i] {
							b.Fatalf("history %d: porcupine verdict %v; want %v", i, got, lb.want[i])
						}
					}
				}
			})
		})
	}
	b.Run(fmt.Sprintf("all-%d/lockproof", len(lb.h)), func(b *testing.B) { run(b, false, false) })
}

// BenchmarkLeaseSim times lockproof and porcupine on batches of 20
// leaseSim histories per class (one key, TTL 100 ms; "single" is 3
// clients and 100 operations at 35% unknown outcomes, the others 4
// clients and 150 operations at 20%), as benchBatch does.
func BenchmarkLeaseSim(b *testing.B) {
	m, err := NewLeaseModel(100*time.Millisecond, time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	classes := []struct {
		name string
		g    leaseSim
	}{
		{"single-ok-35", leaseSim{seed: 1 << 20, ops: 100, clients: 3, unknown: 0.35}},
		{"ok-20", leaseSim{seed: 2 << 20, ops: 150, clients: 4, unknown: 0.20}},
		{"double-grant-20", leaseSim{seed: 3 << 20, ops: 150, clients: 4, unknown: 0.20, bug: bugDoubleGrant}},
		{"phantom-release-20", leaseSim{seed: 4 << 20, ops: 150, clients: 4, unknown: 0.20, bug: bugPhantomRelease}},
		{"token-regress-20", leaseSim{seed: 5 << 20, ops: 150, clients: 4, unknown: 0.20, bug: bugTokenRegress}},
	}
	for _, c := range classes {
		c.g.keys, c.g.ttl, c.g.tol = 1, 100*time.Millisecond, time.Millisecond
		lb := simBatchOf(m, 20, 100*time.Millisecond, func(i int) ([]Operation[LeaseInput, LeaseOutput], Verdict) {
			g := c.g
			g.seed += uint64(i)
			if g.bug != bugNone {
				return leaseSimHistory(g), Illegal
			}
			return leaseSimHistory(g), Ok
		})
		b.Run(c.name, func(b *testing.B) { benchBatch(b, m, &lb) })
	}
}

// BenchmarkFenceSim times lockproof and porcupine on batches of 20
// fenceSim histories per class (4 clients, 150 calls, 20% and 30%
// unknown outcomes, correct or with a stale write), as benchBatch does.
func BenchmarkFenceSim(b *testing.B) {
	m := NewFencedRegisterModel(0)
	for i, u := range []float64{0.20, 0.30} {
		for _, stale := range []bool{false, true} {
			name := fmt.Sprintf("ok-%.0f", 100*u)
			if stale {
				name = fmt.Sprintf("stale-write-%.0f", 100*u)
			}
			lb := simBatchOf(m, 20, 100*time.Millisecond, func(j int) ([]fenceOp, Verdict) {
				g := fenceSim{seed: uint64(6+i)<<20 | uint64(j), ops: 150, clients: 4, unknown: u, staleWrite: stale}
				if stale {
					return fenceSimHistory(g), Illegal
				}
				return fenceSimHistory(g), Ok
			})
			b.Run(name, func(b *testing.B) { benchBatch(b, m, &lb) })
		}
	}
}

// BenchmarkLease100k checks leaseSim histories of 100,000 operations, 8
// clients, with 5%, 10% and 20% of the calls of unknown outcome, on 100
// locks (porcupine alongside) and on one (lockproof alone: porcupine left
// the one at 5% undecided after a minute).
func BenchmarkLease100k(b *testing.B) {
	m, err := NewLeaseModel(100*time.Millisecond, time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	for _, keys := range []int{100, 1} {
		for _, u := range []float64{0.05, 0.1, 0.2} {
			g := leaseSim{seed: 100_000, ops: 100_000, clients: 8, keys: keys, unknown: u, ttl: 100 * time.Millisecond, tol: time.Millisecond}
			h := leaseSimHistory(g)
			b.Run(fmt.Sprintf("locks%d/unknown%02.0f", keys, 100*u), func(b *testing.B) {
				if keys == 1 {
					b.Run("lockproof", func(b *testing.B) { benchCheck(b, Ok, m, h) })
					return
				}
				pm, ph := toPorcupine(m, h)
				benchPair(b, Ok, m, h, pm, ph)
			})
		}
	}
}

// BenchmarkFence100k checks fenceSim histories of 100,000 calls, 8
// clients, with 5%, 20% and 40% of the calls of unknown outcome
// (lockproof alone: one register, one partition).
func BenchmarkFence100k(b *testing.B) {
	m := NewFencedRegisterModel(0)
	for _, u := range []float64{0.05, 0.2, 0.4} {
		h := fenceSimHistory(fenceSim{seed: 100_000, ops: 100_000, clients: 8, unknown: u})
		b.Run(fmt.Sprintf("unknown%02.0f", 100*u), func(b *testing.B) { benchCheck(b, Ok, m, h) })
	}
}
