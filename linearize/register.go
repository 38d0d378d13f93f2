package linearize

import (
	"fmt"
	"hash/maphash"
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
func NewFencedRegisterModel[V comparable](init V) Model[FencedState[V], FencedInput[V], FencedOutput[V]] {
	type S = FencedState[V]
	return Model[S, FencedInput[V], FencedOutput[V]]{
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
}
