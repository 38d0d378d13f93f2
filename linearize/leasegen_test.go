package linearize

import (
	"container/heap"
	"math/rand/v2"
	"time"
)

// leaseBug is a fault leaseSim can plant in a history; each makes the
// history non-linearizable for the lease model whatever else happened.
type leaseBug int

const (
	bugNone leaseBug = iota
	// bugDoubleGrant grants a held lock to a second owner while the first
	// lease is certainly live: the first grant returned before the second
	// was called, the second returned before the first grant's call plus
	// the lease's guaranteed life, and the first owner sent nothing else
	// before then.
	bugDoubleGrant
	// bugPhantomRelease makes a release by an owner that no acquire ever
	// named return ok.
	bugPhantomRelease
	// bugTokenRegress grants with a token no higher than that of a grant
	// that returned before the acquire was called.
	bugTokenRegress
	bugClasses
)

func (b leaseBug) String() string {
	return [...]string{"ok", "double-grant", "phantom-release", "token-regress"}[b]
}

// leaseSim describes a simulated lease-lock workload: clients call a server
// that applies every call at one instant inside its window (an unknown
// call, half of the time, at an instant after it was made, possibly after
// the client gave up; otherwise never). The history is linearizable unless
// bug plants a fault, exactly once.
type leaseSim struct {
	seed    uint64
	ops     int
	clients int
	keys    int
	unknown float64 // fraction of calls with an unknown outcome
	ttl     time.Duration
	tol     time.Duration // the model's tolerance, for bugDoubleGrant's margin
	bug     leaseBug
}

type simEvent struct {
	at     int64
	client int
}

type simQueue []simEvent

func (q simQueue) Len() int           { return len(q) }
func (q simQueue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q simQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)        { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// generate returns the history (IDs in call order per client, dense) and
// whether the bug was planted (a workload may offer no chance for it).
func (g leaseSim) generate() ([]Operation[LeaseInput, LeaseOutput], bool) {
	rng := rand.New(rand.NewPCG(g.seed, uint64(g.bug)<<32|0x1ea5e))
	ttl := int64(g.ttl)
	life := ttl - int64(g.tol)
	ms := int64(time.Millisecond)
	type keyState struct {
		held      bool
		holder    uint64
		expiry    int64
		token     uint64
		holderOp  int   // history index of the holder's grant, -1 if unknown
		lastKnown int   // history index of the last known grant, -1 if none
		retKnown  int64 // its return
	}
	type client struct {
		op     int // history index of the call in flight
		key    int
		held   map[int]uint64
		effect bool  // the server applies the call
		ret    int64 // when the client sees the answer (or gives up)
	}
	keys := make([]keyState, g.keys)
	for k := range keys {
		keys[k].holderOp, keys[k].lastKnown = -1, -1
	}
	cs := make([]client, g.clients)
	touched := map[uint64]bool{} // owners that sent anything after their grant
	// frozen: the first owner of a planted double grant sends nothing
	// until the second grant has returned.
	frozen, frozenUntil := uint64(0), int64(0)
	var (
		h       []Operation[LeaseInput, LeaseOutput]
		q       simQueue
		owners  uint64
		planted bool
		armAt   = g.ops / 3 // plant the bug only after this many calls
	)
	lat := func() int64 { return ms/10 + rng.Int64N(3*ms) }
	call := func(c int, now int64) {
		cl := &cs[c]
		k := rng.IntN(g.keys)
		in := LeaseInput{Lock: keyName(k)}
		at := now + rng.Int64N(2*ms)
		if owner, ok := cl.held[k]; ok && rng.IntN(4) > 0 && (owner != frozen || at > frozenUntil) {
			in.Owner, in.Op = owner, Release
			if rng.IntN(3) == 0 {
				in.Op = Renew
			}
			touched[owner] = true
			if in.Op == Release {
				delete(cl.held, k)
			}
		} else {
			owners++
			in.Op, in.Owner = Acquire, owners
		}
		op := Operation[LeaseInput, LeaseOutput]{ID: len(h), ClientID: c, Call: at, Input: in}
		op.Unknown = rng.Float64() < g.unknown
		cl.op, cl.key = len(h), k
		cl.effect = !op.Unknown || rng.IntN(2) == 0
		apply := at + lat()
		cl.ret = apply + lat()
		if op.Unknown {
			// The client gives up after 4 ms; the call may still land later.
			cl.ret = at + 4*ms
			apply = at + rng.Int64N(8*ms)
		}
		if g.bug == bugPhantomRelease && !planted && len(h) >= armAt && in.Op == Acquire && !op.Unknown {
			// Instead of this acquire, a release for an owner nobody named.
			op.Input.Op, op.Input.Owner = Release, 1<<62+uint64(c)
		}
		h = append(h, op)
		heap.Push(&q, simEvent{at: apply, client: c})
	}
	for c := range cs {
		cs[c].held = map[int]uint64{}
		call(c, 0)
	}
	for len(q) > 0 {
		e := heap.Pop(&q).(simEvent)
		cl := &cs[e.client]
		op := &h[cl.op]
		k := cl.key
		ks := &keys[k]
		if ks.held && e.at >= ks.expiry {
			ks.held = false
		}
		var out LeaseOutput
		if cl.effect {
			switch op.Input.Op {
			case Acquire:
				grant := !ks.held
				if g.bug == bugDoubleGrant && !planted && ks.held && !op.Unknown && len(h) >= armAt &&
					ks.holderOp >= 0 && !touched[ks.holder] && ks.holder != op.Input.Owner {
					g1 := &h[ks.holderOp]
					if g1.Return < op.Call && cl.ret+ms < g1.Call+life {
						grant, planted = true, true
						frozen, frozenUntil = ks.holder, cl.ret
					}
				}
				if grant {
					ks.token++
					tok := ks.token
					if g.bug == bugTokenRegress && !planted && !op.Unknown && len(h) >= armAt &&
						ks.lastKnown >= 0 && ks.retKnown < op.Call {
						tok, planted = h[ks.lastKnown].Output.Token-uint64(rng.IntN(2)), true
						if tok == 0 {
							tok = 1
						}
					}
					ks.held, ks.holder, ks.expiry = true, op.Input.Owner, e.at+ttl
					ks.holderOp = -1
					out = LeaseOutput{OK: true, Token: tok}
					if !op.Unknown {
						cl.held[k] = op.Input.Owner
						ks.holderOp = cl.op
					}
				}
			case Release:
				if op.Input.Owner >= 1<<62 {
					out.OK, planted = true, true
					ks.held = false
				} else if ks.held && ks.holder == op.Input.Owner {
					ks.held = false
					out.OK = true
				}
			case Renew:
				if ks.held && ks.holder == op.Input.Owner {
					ks.expiry = e.at + ttl
					out.OK = true
				}
			}
		}
		if op.Input.Op == Renew && !out.OK {
			delete(cl.held, k)
		}
		if op.Unknown {
			out = LeaseOutput{}
		}
		op.Output, op.Return = out, cl.ret
		if op.Input.Op == Acquire && out.OK && !op.Unknown {
			// Known grants return in order of their tokens here (one
			// server, one instant each), except for a planted regression.
			if ks.lastKnown < 0 || op.Return > ks.retKnown {
				ks.lastKnown, ks.retKnown = cl.op, op.Return
			}
		}
		if len(h) < g.ops {
			// Not before the server's clock: an unknown call may land
			// after its client gave up.
			call(e.client, max(cl.ret, e.at)+rng.Int64N(ms))
		}
	}
	return h, planted || g.bug == bugNone
}

// leaseSimHistory returns a history of g with its bug planted, trying the
// following seeds when a workload offers no chance for it.
func leaseSimHistory(g leaseSim) []Operation[LeaseInput, LeaseOutput] {
	for {
		if h, ok := g.generate(); ok {
			return h
		}
		g.seed += 1 << 40
	}
}
