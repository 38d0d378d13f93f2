package linearize

import (
	"container/heap"
	"math/rand/v2"
	"time"
)

// lockGen describes a generated lease-lock history: clients run a random
// workload against a simulated lock server that applies each call at one
// instant inside its [Call, Return] window.
type lockGen struct {
	seed        uint64
	ops         int
	clients     int
	keys        int
	unknownFrac float64
	ttl         time.Duration
	// bug, if set, makes the server misbehave: "double-grant" grants a held
	// lock now and then, "foreign-release" lets a non-holder release,
	// "stale-token" sometimes reuses the previous token.
	bug string
}

type lockServerKey struct {
	held   bool
	holder uint64
	expiry int64
	token  uint64
}

type pending struct {
	at     int64 // when the call takes effect
	client int
}

type pendingHeap []pending

func (h pendingHeap) Len() int           { return len(h) }
func (h pendingHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h pendingHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)        { *h = append(*h, x.(pending)) }
func (h *pendingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// generate returns the history, each client's operations in order.
func (g lockGen) generate() []Operation[LeaseInput, LeaseOutput] {
	rng := rand.New(rand.NewPCG(g.seed, g.seed^0x5eed))
	ttl := int64(g.ttl)
	server := make([]lockServerKey, g.keys)
	type clientState struct {
		op    Operation[LeaseInput, LeaseOutput]
		key   int
		held  map[int]uint64 // key -> owner it believes it holds
		apply bool           // an unknown-outcome call that takes effect anyway
	}
	clients := make([]clientState, g.clients)
	var owners uint64
	var h []Operation[LeaseInput, LeaseOutput]
	var q pendingHeap
	lat := func() int64 { return int64(50*time.Microsecond) + rng.Int64N(int64(2*time.Millisecond)) }
	plan := func(c int, now int64) {
		cs := &clients[c]
		key := rng.IntN(g.keys)
		in := LeaseInput{Lock: keyName(key)}
		if owner, ok := cs.held[key]; ok && rng.IntN(3) > 0 {
			in.Owner = owner
			in.Op = Release
			if rng.IntN(2) == 0 {
				in.Op = Renew
			}
			delete(cs.held, key)
			if in.Op == Renew {
				cs.held[key] = owner
			}
		} else if rng.IntN(20) == 0 {
			in.Op, in.Owner = Release, rng.Uint64N(owners+1)+1 // foreign or stale
		} else {
			owners++
			in.Op, in.Owner = Acquire, owners
		}
		cs.key = key
		call := now + rng.Int64N(int64(time.Millisecond))
		cs.op = Operation[LeaseInput, LeaseOutput]{ID: len(h), ClientID: c, Call: call, Input: in}
		cs.op.Unknown = rng.Float64() < g.unknownFrac
		cs.apply = !cs.op.Unknown || rng.IntN(2) == 0
		at := call + lat()
		heap.Push(&q, pending{at: at, client: c})
		h = append(h, Operation[LeaseInput, LeaseOutput]{}) // placeholder, filled on return
	}
	for c := range clients {
		clients[c].held = map[int]uint64{}
		plan(c, 0)
	}
	for len(q) > 0 {
		p := heap.Pop(&q).(pending)
		cs := &clients[p.client]
		op := cs.op
		k := cs.key
		sk := &server[k]
		if sk.held && p.at >= sk.expiry {
			sk.held = false
		}
		var out LeaseOutput
		if cs.apply {
			switch op.Input.Op {
			case Acquire:
				grant := !sk.held || (g.bug == "double-grant" && rng.IntN(50) == 0)
				if grant {
					if g.bug != "stale-token" || rng.IntN(50) != 0 || sk.token == 0 {
						sk.token++
					}
					sk.held, sk.holder, sk.expiry = true, op.Input.Owner, p.at+ttl
					out = LeaseOutput{OK: true, Token: sk.token}
					if !op.Unknown {
						cs.held[k] = op.Input.Owner
					}
				}
			case Release:
				if sk.held && (sk.holder == op.Input.Owner || g.bug == "foreign-release" && rng.IntN(10) == 0) {
					sk.held = false
					out.OK = true
				}
			case Renew:
				if sk.held && sk.holder == op.Input.Owner {
					sk.expiry = p.at + ttl
					out.OK = true
				}
			}
		}
		if !out.OK && op.Input.Op == Renew {
			delete(cs.held, k)
		}
		op.Output = out
		op.Return = p.at + lat()
		if op.Unknown {
			// The client gave up after a timeout, maybe before the call
			// took effect.
			op.Output, op.Return = LeaseOutput{}, op.Call+int64(time.Millisecond)
		}
		h[op.ID] = op
		if len(h) < g.ops {
			plan(p.client, op.Return)
		}
	}
	return h
}

func keyName(i int) string { return string(rune('a'+i%26)) + string(rune('0'+i/26)) }
