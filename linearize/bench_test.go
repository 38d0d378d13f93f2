package linearize

import (
	"context"
	"hash/fnv"
	"maps"
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
	b.Run("lockproof", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := Check(context.Background(), model, h, Options{NoMinimize: true})
			if err != nil || res.Verdict != want {
				b.Fatalf("verdict %v, err %v; want %v", res.Verdict, err, want)
			}
		}
	})
	b.Run("porcupine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got := pcVerdict(porcupine.CheckOperations(pm, ph)); got != want {
				b.Fatalf("porcupine verdict %v; want %v", got, want)
			}
		}
	})
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
