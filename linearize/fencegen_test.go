package linearize

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// fenceOp is an operation on a fenced register of int values.
type fenceOp = Operation[FencedInput[int], FencedOutput[int]]

// fenceSim describes a simulated workload on a register guarded by fencing
// tokens (locks.Fence), beside leaseSim's lease histories: each client
// holds the token of its latest grant, a newer one from time to time
// (tokens come from one counter, as a lock service hands them out), and
// reads, writes or peeks at the register. Clients that were not granted
// the lock again keep their old token, so that their calls come stale and
// are refused. The register applies each call at one instant inside its
// window (an unknown one, half of the time, at an instant after it was
// made, possibly after the client gave up; otherwise never). The history
// is linearizable unless staleWrite is set: then one known write, whose
// token is lower than that of a call admitted and returned before the
// write was called, is accepted all the same.
type fenceSim struct {
	seed       uint64
	ops        int
	clients    int
	unknown    float64 // fraction of calls with an unknown outcome
	staleWrite bool
}

// generate returns the history (IDs in call order per client, dense) and
// whether the bug was planted (a workload may offer no chance for it).
func (g fenceSim) generate() ([]fenceOp, bool) {
	stream := uint64(0xfe1ce)
	if g.staleWrite {
		stream |= 1 << 32
	}
	rng := rand.New(rand.NewPCG(g.seed, stream))
	ms := int64(time.Millisecond)
	type client struct {
		op     int
		token  uint64
		effect bool
		ret    int64
	}
	cs := make([]client, g.clients)
	var (
		h         []fenceOp
		q         simQueue
		counter   uint64 // the lock service's last token
		highest   uint64 // the register's
		seen      bool
		value     int
		planted   bool
		armAt     = g.ops / 3
		admitted  []int // known admitted Read and Write calls, history indices
		lastNewer = 4   // one call in lastNewer takes a newer token
	)
	lat := func() int64 { return ms/10 + rng.Int64N(3*ms) }
	call := func(c int, now int64) {
		cl := &cs[c]
		if cl.token == 0 || rng.IntN(lastNewer) == 0 {
			counter++
			cl.token = counter
		}
		at := now + rng.Int64N(2*ms)
		in := FencedInput[int]{Token: cl.token}
		switch r := rng.IntN(20); {
		case r < 10:
			in.Op, in.Value = Write, len(h)+1
		case r < 17:
			in.Op = Read
		default:
			in.Op, in.Token = Peek, 0
		}
		op := fenceOp{ID: len(h), ClientID: c, Call: at, Input: in}
		op.Unknown = rng.Float64() < g.unknown
		cl.op = len(h)
		cl.effect = !op.Unknown || rng.IntN(2) == 0
		apply := at + lat()
		cl.ret = apply + lat()
		if op.Unknown {
			cl.ret = at + 4*ms
			apply = at + rng.Int64N(8*ms)
		}
		h = append(h, op)
		heap.Push(&q, simEvent{at: apply, client: c})
	}
	// stale reports whether a known call admitted with a token above tok
	// returned before at.
	stale := func(tok uint64, at int64) bool {
		for _, i := range admitted {
			if h[i].Return < at && h[i].Input.Token > tok {
				return true
			}
		}
		return false
	}
	for c := range cs {
		call(c, 0)
	}
	for len(q) > 0 {
		e := heap.Pop(&q).(simEvent)
		cl := &cs[e.client]
		op := &h[cl.op]
		in := op.Input
		var out FencedOutput[int]
		if cl.effect {
			switch in.Op {
			case Peek:
				out = FencedOutput[int]{OK: true, Value: value}
			default:
				admit := !seen || in.Token >= highest
				if !admit && g.staleWrite && !planted && in.Op == Write && !op.Unknown && len(h) >= armAt && stale(in.Token, op.Call) {
					// The bug: a stale write goes through, and the
					// register keeps its highest token.
					planted, value = true, in.Value
					out = FencedOutput[int]{OK: true}
					break
				}
				if admit {
					highest, seen = in.Token, true
					if in.Op == Write {
						value = in.Value
					}
					out = FencedOutput[int]{OK: true}
					if in.Op == Read {
						out.Value = value
					}
				}
			}
		}
		if op.Unknown {
			out = FencedOutput[int]{}
		}
		op.Output, op.Return = out, cl.ret
		if !op.Unknown && out.OK && in.Op != Peek {
			admitted = append(admitted, cl.op)
		}
		if len(h) < g.ops {
			call(e.client, max(cl.ret, e.at)+rng.Int64N(ms))
		}
	}
	return h, planted || !g.staleWrite
}

// fenceSimHistory returns a history of g with its bug planted, trying the
// following seeds when a workload offers no chance for it.
func fenceSimHistory(g fenceSim) []fenceOp {
	for {
		if h, ok := g.generate(); ok {
			return h
		}
		g.seed += 1 << 40
	}
}

// genFenceSmallSim is a short simulated fenced history at a random unknown
// fraction, with a stale write or without, and the model to check it by.
func genFenceSmallSim(rng *rand.Rand) (Model[FencedState[int], FencedInput[int], FencedOutput[int]], []fenceOp) {
	g := fenceSim{seed: rng.Uint64(), ops: 4 + rng.IntN(36), clients: 1 + rng.IntN(4),
		unknown: 0.05 + 0.35*rng.Float64(), staleWrite: rng.IntN(2) == 0}
	h, _ := g.generate()
	return NewFencedRegisterModel(0), h
}

// TestFenceSimVerdicts checks fenceSim's histories against their verdicts
// by construction, with a stale write and without, at several unknown
// fractions and client counts, up to the generator's extremes.
func TestFenceSimVerdicts(t *testing.T) {
	m := NewFencedRegisterModel(0)
	n := 12
	if deep() {
		n = 200
	}
	for _, stale := range []bool{false, true} {
		gens := []fenceSim{}
		for i := range n {
			gens = append(gens, fenceSim{seed: uint64(i), ops: 50 + 25*(i%5), clients: 2 + i%7,
				unknown: []float64{0.05, 0.2, 0.3, 0.4}[i%4], staleWrite: stale})
		}
		// The generator's extremes: 8 clients, 5% and 40% unknown, 5,000
		// calls (LOCKPROOF_DEEP: 100,000).
		for _, u := range []float64{0.05, 0.4} {
			ops := 5000
			if deep() {
				ops = 100_000
			}
			gens = append(gens, fenceSim{seed: 1 << 20, ops: ops, clients: 8, unknown: u, staleWrite: stale})
		}
		for i, g := range gens {
			h := fenceSimHistory(g)
			res, err := Check(context.Background(), m, h, Options{TimeLimit: decideLimit})
			if err != nil {
				t.Fatal(err)
			}
			want := Ok
			if stale {
				want = Illegal
			}
			if res.Verdict != want {
				t.Fatalf("history %d (%+v): verdict %v, want %v", i, g, res.Verdict, want)
			}
			if want == Ok {
				verifyLinearization(t, m, h, &res)
			} else if !res.Minimal {
				t.Errorf("history %d (%+v): counterexample of %d operations not minimal", i, g, len(res.Counterexample))
			}
			if g.ops > 1000 {
				t.Logf("%+v: %d operations, %v in %v", g, len(h), res.Verdict, res.Elapsed)
			}
		}
	}
}
