package linearize

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"reflect"
	"slices"
)

// RegisterOp is the kind of a register operation.
type RegisterOp uint8

const (
	// Read returns the register's value. On a fenced register it carries a
	// token and is admitted like a write (locks.Fence.Read).
	Read RegisterOp = iota + 1
	// Write sets the value; on a fenced register only with a token at least
	// the highest seen.
	Write
	// Peek reads a fenced register without a token: it is never refused and
	// never raises the highest token.
	Peek
)

var registerOpNames = [...]string{Read: "read", Write: "write", Peek: "peek"}

// String returns "read", "write" or "peek".
func (o RegisterOp) String() string {
	if o >= Read && o <= Peek {
		return registerOpNames[o]
	}
	return fmt.Sprintf("RegisterOp(%d)", uint8(o))
}

// MarshalText encodes the op as its name.
func (o RegisterOp) MarshalText() ([]byte, error) {
	if o < Read || o > Peek {
		return nil, fmt.Errorf("linearize: invalid register op %d", uint8(o))
	}
	return []byte(registerOpNames[o]), nil
}

// UnmarshalText decodes "read", "write" or "peek".
func (o *RegisterOp) UnmarshalText(b []byte) error {
	for i := Read; i <= Peek; i++ {
		if string(b) == registerOpNames[i] {
			*o = i
			return nil
		}
	}
	return fmt.Errorf("linearize: unknown register op %q (want read, write or peek)", b)
}

// RegisterInput is a call on a register holding a V.
type RegisterInput[V comparable] struct {
	// Op is Read or Write.
	Op RegisterOp `json:"op"`
	// Value is the value written (Write only).
	Value V `json:"value"`
}

// RegisterOutput is what a register call returned.
type RegisterOutput[V comparable] struct {
	// Value is the value read (Read only).
	Value V `json:"value"`
}

var hashSeed = maphash.MakeSeed()

// NewRegisterModel returns the model of one atomic register holding a V,
// initially init: Read returns the last value written (Peek is not an
// operation of this model). An unknown Write may have set the value; an unknown Read is skipped (it
// changes nothing).
func NewRegisterModel[V comparable](init V) Model[V, RegisterInput[V], RegisterOutput[V]] {
	return Model[V, RegisterInput[V], RegisterOutput[V]]{
		Init: func() V { return init },
		Step: func(dst []V, s V, op *Operation[RegisterInput[V], RegisterOutput[V]]) []V {
			switch op.Input.Op {
			case Write:
				return append(dst, op.Input.Value)
			case Read:
				if op.Unknown || op.Output.Value == s {
					return append(dst, s)
				}
			}
			return dst
		},
		ReadOnly: func(op *Operation[RegisterInput[V], RegisterOutput[V]]) bool { return op.Input.Op == Read },
		ReadHash: func(op *Operation[RegisterInput[V], RegisterOutput[V]]) (uint64, bool) {
			return maphash.Comparable(hashSeed, op.Output.Value), op.Input.Op == Read
		},
		Equal: func(a, b V) bool { return a == b },
		Hash:  func(v V) uint64 { return maphash.Comparable(hashSeed, v) },
		DescribeOperation: func(op *Operation[RegisterInput[V], RegisterOutput[V]]) string {
			switch {
			case op.Input.Op == Write:
				return fmt.Sprintf("write(%v)%s", op.Input.Value, unknownMark(op.Unknown))
			case op.Unknown:
				return "read() -> ?"
			}
			return fmt.Sprintf("read() -> %v", op.Output.Value)
		},
	}
}

func unknownMark(unknown bool) string {
	if unknown {
		return " -> ?"
	}
	return ""
}

// FencedInput is a call on a fenced register.
type FencedInput[V comparable] struct {
	// Op is Read, Write or Peek.
	Op RegisterOp `json:"op"`
	// Token is the caller's fencing token (Read and Write).
	Token uint64 `json:"token"`
	// Value is the value written (Write only).
	Value V `json:"value"`
}

// FencedOutput is what a fenced register call returned.
type FencedOutput[V comparable] struct {
	// OK: the token was admitted (always true for Peek).
	OK bool `json:"ok"`
	// Value is the value read (admitted Read, Peek).
	Value V `json:"value"`
}

// FencedState is the state of a fenced register.
type FencedState[V comparable] struct {
	// Value is the register's value.
	Value V
	// Highest is the highest token admitted so far; Seen reports whether
	// any was.
	Highest uint64
	Seen    bool
}

// NewFencedRegisterModel returns the model of a register guarded by
// fencing tokens, as locks.Fence: a Read or Write is admitted iff no higher
// token was admitted before (an equal one is fine), and raises the highest
// token to its own; an admitted Write sets the value, an admitted Read
// returns it; a refused one (OK false) changes nothing. Peek returns the
// value without a token. A stale write that is accepted, or a read that
// misses an admitted write, is Illegal.
//
// Unknown outcomes: an unknown Read or Write, if admitted, raised the
// highest token (and a Write set the value); if refused it changed nothing,
// which is the same as leaving it out.
//
// Check first looks for a violation visible without search: a Read or
// Write admitted with a token lower than that of one admitted and
// returned before it was called (the highest token can only have risen
// in between). Those two operations are then the counterexample;
// otherwise the generic search decides.
func NewFencedRegisterModel[V comparable](init V) Model[FencedState[V], FencedInput[V], FencedOutput[V]] {
	type S = FencedState[V]
	m := Model[S, FencedInput[V], FencedOutput[V]]{
		Init: func() S { return S{Value: init} },
		Step: func(dst []S, s S, op *Operation[FencedInput[V], FencedOutput[V]]) []S {
			in, out := op.Input, op.Output
			if in.Op == Peek {
				if op.Unknown || out.Value == s.Value {
					return append(dst, s)
				}
				return dst
			}
			if in.Op != Read && in.Op != Write {
				return dst
			}
			admit := !s.Seen || in.Token >= s.Highest
			if op.Unknown || out.OK {
				if !admit {
					if op.Unknown {
						return append(dst, s)
					}
					return dst
				}
				if !op.Unknown && in.Op == Read && out.Value != s.Value {
					return dst
				}
				next := S{Value: s.Value, Highest: in.Token, Seen: true}
				if in.Op == Write {
					next.Value = in.Value
				}
				return append(dst, next)
			}
			if admit {
				return dst // refused a token it had to admit
			}
			return append(dst, s)
		},
		ReadOnly: func(op *Operation[FencedInput[V], FencedOutput[V]]) bool { return op.Input.Op == Peek },
		Equal:    func(a, b S) bool { return a == b },
		Hash: func(s S) uint64 {
			h := maphash.Comparable(hashSeed, s.Value) ^ s.Highest*0x9e3779b97f4a7c15
			if s.Seen {
				h = ^h
			}
			return h
		},
		DescribeOperation: func(op *Operation[FencedInput[V], FencedOutput[V]]) string {
			in, out := op.Input, op.Output
			var call string
			switch in.Op {
			case Write:
				call = fmt.Sprintf("write(#%d, %v)", in.Token, in.Value)
			case Read:
				call = fmt.Sprintf("read(#%d)", in.Token)
			default:
				call = "peek()"
			}
			switch {
			case op.Unknown:
				return call + " -> ?"
			case in.Op != Peek && !out.OK:
				return call + " -> stale"
			case in.Op == Write:
				return call + " -> ok"
			}
			return fmt.Sprintf("%s -> %v", call, out.Value)
		},
	}
	m.spent = func(s S, op *Operation[FencedInput[V], FencedOutput[V]]) bool {
		// Peek never changes the state; a token below the highest is
		// refused from here on (the highest only rises).
		return op.Input.Op == Peek || s.Seen && op.Input.Token < s.Highest
	}
	base := m
	m.fast = func(parent, _ context.Context, h []Operation[FencedInput[V], FencedOutput[V]], opts Options, b *budget) (Result, bool) {
		return decideFenced(parent, &base, h, opts, b)
	}
	m.fastStep = reflect.ValueOf(m.Step).Pointer()
	return m
}

// decideFenced is the fenced register's decider: the violation of
// fencedEvident, confirmed by a search of its two operations (which also
// names the blocker), or false to leave the history to the generic
// search. m is the model without its decider.
func decideFenced[V comparable](parent context.Context, m *Model[FencedState[V], FencedInput[V], FencedOutput[V]], h []Operation[FencedInput[V], FencedOutput[V]], opts Options, b *budget) (Result, bool) {
	cand := fencedEvident(h)
	if cand == nil {
		return Result{}, false
	}
	fm, err := fill(*m)
	if err != nil {
		return Result{}, false
	}
	sr := getSearcher(&fm, h, b, nil)
	sr.reset(cand)
	out := sr.run()
	putSearcher(sr)
	if out.verdict != Illegal {
		return Result{}, false
	}
	res := Result{Verdict: Illegal, Partitions: whole(h), FailingPartition: 0, Blocker: out.blocker}
	res.Partitions[0].Verdict, res.Partitions[0].blocker = Illegal, out.blocker
	if opts.NoMinimize {
		res.Counterexample = cand
	} else {
		res.Counterexample, res.Minimal, res.ShrinkElapsed = shrinkWithin(parent, &fm, h, cand, out.blocker, opts)
	}
	return res, true
}

// fencedEvident returns a Read or Write admitted (known, OK) with a token
// lower than that of another admitted one that returned before it was
// called, as the history indices of the two by call, or nil. A sweep of
// the admitted operations by call, with the highest token among those
// returned before the call.
func fencedEvident[V comparable](h []Operation[FencedInput[V], FencedOutput[V]]) []int {
	var byCall []int
	for i := range h {
		op := &h[i]
		if !op.Unknown && op.Output.OK && (op.Input.Op == Read || op.Input.Op == Write) {
			byCall = append(byCall, i)
		}
	}
	if len(byCall) < 2 {
		return nil
	}
	byRet := slices.Clone(byCall)
	slices.SortFunc(byCall, func(a, b int) int { return cmp.Compare(h[a].Call, h[b].Call) })
	slices.SortFunc(byRet, func(a, b int) int { return cmp.Compare(h[a].Return, h[b].Return) })
	best, r := -1, 0
	for _, g := range byCall {
		for r < len(byRet) && h[byRet[r]].Return < h[g].Call {
			if best < 0 || h[byRet[r]].Input.Token > h[best].Input.Token {
				best = byRet[r]
			}
			r++
		}
		if best >= 0 && h[g].Input.Token < h[best].Input.Token {
			return []int{best, g}
		}
	}
	return nil
}
