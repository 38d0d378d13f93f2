package linearize

import (
	"context"
	"fmt"
	"reflect"
)

// Model is the sequential specification a history is checked against: a
// state machine over states S, operation inputs I and outputs O. Models must
// be pure: Step must not modify the state it is given (states are shared
// between branches of the search), nor the operation.
//
// Only Init and Step are required. Equal is required when S is not a
// comparable type; otherwise == is used.
//
// Step appends, as strconv.AppendInt does, so that a step allocates
// nothing. Appending no state means op cannot take effect in state with
// the output it recorded; several states express nondeterminism (a lease
// that may or may not have expired). For an op with Unknown set, Output is
// meaningless: Step appends the states reachable for every output it
// could have returned. Leaving the operation out needs no state, and the
// checker drops appended states equal to state, since such a step is the
// same as skipping. Time-aware models read op.Call and op.End().
//
// Partition is sound when the model is the product of independent per-key
// models, as for a key-value store or a set of named locks:
// linearizability is local, a history is linearizable iff every per-key
// sub-history is.
//
// ReadOnly lets the search linearize such an operation as soon as it can,
// without trying other orders there: moving a read-only operation earlier,
// while it is a candidate and succeeds, never rules out a linearization.
// ReadHash lets it turn a read down in a state with another hash without
// calling Step, so a read that does not match, the commonest dead end of a
// key-value history, costs one comparison; Step still decides in a state
// whose hash matches.
type Model[S, I, O any] struct {
	// Init returns the initial state.
	Init func() S
	// Step appends to dst every state the model may be in after op is
	// applied in state (none: op cannot take effect there with its
	// recorded output), and returns the extended slice. See the type's
	// doc for unknown outcomes and nondeterminism.
	Step func(dst []S, state S, op *Operation[I, O]) []S
	// Partition, if set, maps an input to the key of its partition; the
	// partitions are then checked apart, in parallel, and Init and Step
	// describe one partition (see the type's doc for when that is sound).
	// Default: one partition.
	Partition func(in I) string
	// ReadOnly, if set, reports that op never changes the state: for every
	// state s, Step(s, op) appends nothing or exactly s (a key-value get).
	// A wrong answer makes the checker unsound. Default: none is.
	ReadOnly func(op *Operation[I, O]) bool
	// ReadHash, if set, returns for an operation with a known outcome a
	// hash h (and true) such that Step accepts op only in states whose Hash
	// is h (a get that returned v: the Hash of v). A wrong h can make the
	// checker reject a linearizable history, never accept a bad one.
	ReadHash func(op *Operation[I, O]) (uint64, bool)
	// Equal reports whether two states are the same. Default == (only for a
	// comparable S; Check returns ErrInvalidModel otherwise).
	Equal func(a, b S) bool
	// Hash returns a hash of a state; Equal states must have equal hashes.
	// It spreads the memo table: without it every state of one linearized
	// set falls into one bucket and is told apart by Equal alone.
	Hash func(s S) uint64
	// DescribeOperation renders an operation for pictures, e.g.
	// "acquire(7) -> granted #3". Default: fmt's %v of input and output.
	DescribeOperation func(op *Operation[I, O]) string
	// DescribeState renders a state for pictures. Default: fmt's %v.
	DescribeState func(s S) string

	// fast, set by a model constructor (NewLeaseModel), decides a history
	// before the generic search (parent is the caller's ctx, for
	// shrinking), or returns false. Used only while Step is the
	// constructor's (fastStep): a replaced Step gets the generic search.
	fast     func(parent, ctx context.Context, h []Operation[I, O], opts Options, b *budget) (Result, bool)
	fastStep uintptr
	// superset: for an unknown operation Step appends exactly one state,
	// a set that includes the state it was given and so covers "never took
	// effect" (the fast deciders' set-valued models); the search then adds
	// no no-effect step of its own.
	superset bool
	// spent, set by a model constructor, reports that the unknown op can
	// take no effect from s nor from any state reached from it (a fenced
	// write below the highest token): the search on sets settles it at once
	// (filled.retired). Like fast, used only while Step is the constructor's.
	spent func(s S, op *Operation[I, O]) bool

	_ struct{} // keyed literals only
}

// fastUsable reports whether m's fast decider may decide for it.
func (m *Model[S, I, O]) fastUsable() bool {
	return m.fast != nil && m.Step != nil && reflect.ValueOf(m.Step).Pointer() == m.fastStep
}

// filled is a model with its defaults in place, ready for the search.
type filled[S, I, O any] struct {
	Model[S, I, O]
	// stepCap, if positive, makes a search of n operations give up
	// (Unknown, budget untouched) after about stepCap*n + capSlack steps
	// (it looks every 64 steps).
	stepCap int
	// over, if set, makes a search give up (Unknown, budget untouched)
	// once it reports true; it is asked every 1024 steps (a pausable
	// search's every 64), with the steps taken (alternate's rounds).
	over func(steps uint32) bool
	// pooled, for a set-valued model (Model.superset), marks unknown
	// operations interchangeable but for their call time, the first called
	// dominating the others wherever it is placed: the search places them
	// in call order only (see searcher.tryPool).
	pooled func(op *Operation[I, O]) bool
	// retired, for a set-valued model, reports that an unknown operation
	// can take no effect from the state or from any state reached from
	// it: the search then settles it as never taken effect at once
	// instead of keeping it a candidate to the end.
	retired func(s S, op *Operation[I, O]) bool
	// prepare, if set, is told the operations (history indices) of each
	// search and its budget before it starts: the relaxed search's steps
	// depend on them, and one may be long enough to look at the budget.
	prepare func(ops []int, b *budget)
	// unsure, if set, reports that the model's steps since the search
	// started may have left states out (a closure of the relaxed search
	// stopped at its cap, its budget or the Check's): the search then
	// ends Unknown instead of Illegal.
	unsure func() bool
}

// fill validates m and fills in the defaults.
func fill[S, I, O any](m Model[S, I, O]) (filled[S, I, O], error) {
	if m.Init == nil {
		return filled[S, I, O]{}, fmt.Errorf("%w: Init is nil", ErrInvalidModel)
	}
	if m.Step == nil {
		return filled[S, I, O]{}, fmt.Errorf("%w: Step is nil", ErrInvalidModel)
	}
	if m.Equal == nil {
		t := reflect.TypeFor[S]()
		if !strictlyComparable(t) {
			return filled[S, I, O]{}, fmt.Errorf(
				"%w: state type %v needs an Equal function", ErrInvalidModel, t)
		}
		m.Equal = func(a, b S) bool { return any(a) == any(b) }
	}
	if m.Hash == nil {
		m.Hash = func(S) uint64 { return 0 }
	}
	if m.DescribeOperation == nil {
		m.DescribeOperation = describeOperation[I, O]
	}
	if m.DescribeState == nil {
		m.DescribeState = func(s S) string { return fmt.Sprintf("%v", s) }
	}
	return filled[S, I, O]{Model: m}, nil
}

func describeOperation[I, O any](op *Operation[I, O]) string {
	if op.Unknown {
		return fmt.Sprintf("%v -> ?", op.Input)
	}
	return fmt.Sprintf("%v -> %v", op.Input, op.Output)
}

// strictlyComparable reports whether == on values of t can never panic: t is
// comparable and holds no interface, whose dynamic value might not be.
func strictlyComparable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Interface:
		return false
	case reflect.Array:
		return strictlyComparable(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !strictlyComparable(t.Field(i).Type) {
				return false
			}
		}
		return true
	default:
		return t.Comparable()
	}
}
