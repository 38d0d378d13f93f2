package linearize

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"
)

// ModelKind names one of the package's models, as a Spec and a history
// file spell it.
type ModelKind string

// The kinds of model a Spec can name.
const (
	// KindLease is NewLeaseModel.
	KindLease ModelKind = "lease"
	// KindLeaseFromCall is NewLeaseFromCallModel.
	KindLeaseFromCall ModelKind = "lease-from-call"
	// KindSemaphore is NewSemaphoreModel.
	KindSemaphore ModelKind = "semaphore"
	// KindRWLock is NewRWLeaseModel.
	KindRWLock ModelKind = "rwlock"
	// KindFenced is NewFencedRegisterModel of string values, initially "".
	KindFenced ModelKind = "fenced"
	// KindRegister is NewRegisterModel of string values, initially "".
	KindRegister ModelKind = "register"
	// KindKV is NewKVModel.
	KindKV ModelKind = "kv"
)

// ModelKinds lists every kind a Spec may name, in the order help texts
// give them.
var ModelKinds = []ModelKind{KindLease, KindLeaseFromCall, KindSemaphore, KindRWLock, KindFenced, KindRegister, KindKV}

// Spec is a model as a value: which of the package's models and its
// parameters. A program records it beside a history, a history file
// carries it (EncodeFile), and Bind and ReadFile build the model from it.
// Its JSON form is {"kind": "semaphore", "permits": 2, "ttl": 1000000000,
// "tolerance": 1000000}, durations in the history's time unit
// (nanoseconds by convention), members that do not apply left out.
type Spec struct {
	// Kind is the model.
	Kind ModelKind
	// Permits is the semaphore's number of holders at once (KindSemaphore
	// only; zero for the others).
	Permits int
	// TTL and Tolerance are the lease models' (KindLease,
	// KindLeaseFromCall, KindSemaphore, KindRWLock): TTL > 0 and
	// 0 <= Tolerance < TTL. Zero for the other kinds.
	TTL, Tolerance time.Duration
}

// leased reports whether the kind is one of the lease models, which check
// histories of LeaseInput and LeaseOutput with a TTL and a tolerance.
func (k ModelKind) leased() bool {
	return k == KindLease || k == KindLeaseFromCall || k == KindSemaphore || k == KindRWLock
}

// Validate says what is wrong with s, wrapping ErrInvalidModel, or
// returns nil: an unknown kind, a parameter out of range, or one given to
// a kind that has no such parameter.
func (s Spec) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s model: %s", ErrInvalidModel, s.Kind, fmt.Sprintf(format, args...))
	}
	switch {
	case !s.Kind.known():
		return fmt.Errorf("%w: unknown model kind %q (want one of %v)", ErrInvalidModel, string(s.Kind), ModelKinds)
	case s.Kind == KindSemaphore && s.Permits < 1:
		return bad("permits %d, want at least 1", s.Permits)
	case s.Kind != KindSemaphore && s.Permits != 0:
		return bad("permits %d given, but only the semaphore model has permits", s.Permits)
	case !s.Kind.leased() && (s.TTL != 0 || s.Tolerance != 0):
		return bad("ttl %v and tolerance %v given, but only the lease models have them", s.TTL, s.Tolerance)
	case s.Kind.leased() && s.TTL <= 0:
		return bad("ttl %v, want a positive duration", s.TTL)
	case s.Kind.leased() && (s.Tolerance < 0 || s.Tolerance >= s.TTL):
		return bad("tolerance %v, want 0 <= tolerance < ttl %v", s.Tolerance, s.TTL)
	}
	return nil
}

func (k ModelKind) known() bool {
	for _, m := range ModelKinds {
		if k == m {
			return true
		}
	}
	return false
}

// String is the one text form of a Spec, for messages and pictures:
// "semaphore model of 2 permits, TTL 1s, tolerance 1ms", "fenced model".
func (s Spec) String() string {
	text := string(s.Kind) + " model"
	if s.Kind == KindSemaphore {
		text += fmt.Sprintf(" of %d permits", s.Permits)
	}
	if s.Kind.leased() {
		text += fmt.Sprintf(", TTL %v, tolerance %v", s.TTL, s.Tolerance)
	}
	return text
}

// picture is p with the lease windows the spec's model has drawn: only
// the one-holder lease models', since the picture marks two owners'
// windows that overlap, which a semaphore and readers allow.
func (s Spec) picture(p Picture) Picture {
	p.LeaseTTL, p.LeaseTolerance = 0, 0
	if s.Kind == KindLease || s.Kind == KindLeaseFromCall {
		p.LeaseTTL, p.LeaseTolerance = s.TTL, s.Tolerance
	}
	return p
}

// built is a Spec's model made, its state type hidden: what the one
// mapping from a Spec to a model (Spec.build) returns.
type built interface {
	// checker returns the model's Checker[I, O] (as any: its I and O are
	// the model's).
	checker() any
	// decode reads a history of the model's operations from the JSON
	// document data.
	decode(data []byte) (fileHistory, error)
}

// kindModel is a built model of state S, inputs I and outputs O.
type kindModel[S, I, O any] struct {
	spec  Spec
	model Model[S, I, O]
}

func (k kindModel[S, I, O]) checker() any { return k.typed() }

func (k kindModel[S, I, O]) typed() Checker[I, O] {
	m, spec := k.model, k.spec
	return Checker[I, O]{
		spec: spec,
		check: func(ctx context.Context, h []Operation[I, O], opts Options) (Result, error) {
			return Check(ctx, m, h, opts)
		},
		describe: func(op *Operation[I, O]) string {
			if m.DescribeOperation == nil {
				return describeOperation(op)
			}
			return m.DescribeOperation(op)
		},
		draw: func(w io.Writer, html bool, h []Operation[I, O], res *Result, p Picture) error {
			if html {
				return WriteHTML(w, m, h, res, spec.picture(p))
			}
			return WriteText(w, m, h, res, spec.picture(p))
		},
	}
}

func (k kindModel[S, I, O]) decode(data []byte) (fileHistory, error) {
	h, err := decodeHistory[I, O](data)
	if err != nil {
		return nil, err
	}
	return boundHistory[I, O]{c: k.typed(), h: h}, nil
}

// build is the one place a Spec becomes a model.
func (s Spec) build() (built, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var b built
	var err error
	switch s.Kind {
	case KindLease, KindLeaseFromCall:
		newModel := NewLeaseModel
		if s.Kind == KindLeaseFromCall {
			newModel = NewLeaseFromCallModel
		}
		var m Model[LeaseState, LeaseInput, LeaseOutput]
		m, err = newModel(s.TTL, s.Tolerance)
		b = kindModel[LeaseState, LeaseInput, LeaseOutput]{s, m}
	case KindSemaphore:
		var m Model[SemaphoreState, LeaseInput, LeaseOutput]
		m, err = NewSemaphoreModel(s.Permits, s.TTL, s.Tolerance)
		b = kindModel[SemaphoreState, LeaseInput, LeaseOutput]{s, m}
	case KindRWLock:
		var m Model[RWLeaseState, LeaseInput, LeaseOutput]
		m, err = NewRWLeaseModel(s.TTL, s.Tolerance)
		b = kindModel[RWLeaseState, LeaseInput, LeaseOutput]{s, m}
	case KindFenced:
		b = kindModel[FencedState[string], FencedInput[string], FencedOutput[string]]{s, NewFencedRegisterModel("")}
	case KindRegister:
		b = kindModel[string, RegisterInput[string], RegisterOutput[string]]{s, NewRegisterModel("")}
	case KindKV:
		b = kindModel[KVValue, KVInput, KVOutput]{s, NewKVModel()}
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Checker is the model a Spec names, built for histories of inputs I and
// outputs O (Bind): it checks, describes and draws them with its state
// type hidden, and with the lease windows its kind has drawn.
type Checker[I, O any] struct {
	spec     Spec
	check    func(ctx context.Context, h []Operation[I, O], opts Options) (Result, error)
	describe func(op *Operation[I, O]) string
	draw     func(w io.Writer, html bool, h []Operation[I, O], res *Result, p Picture) error
}

// errZeroChecker is the error of a Checker not made by Bind.
var errZeroChecker = fmt.Errorf("%w: a zero Checker (make one with Bind)", ErrInvalidModel)

// Bind builds the model s names for histories of inputs I and outputs O.
// It returns an error wrapping ErrInvalidModel when s is not valid or its
// model checks operations of other types (a fenced model for LeaseInput).
func Bind[I, O any](s Spec) (Checker[I, O], error) {
	b, err := s.build()
	if err != nil {
		return Checker[I, O]{}, err
	}
	c, ok := b.checker().(Checker[I, O])
	if !ok {
		return Checker[I, O]{}, fmt.Errorf("%w: the %s checks operations of other types than %v",
			ErrInvalidModel, s, reflect.TypeFor[Operation[I, O]]())
	}
	return c, nil
}

// Spec is the spec the checker was built from.
func (c Checker[I, O]) Spec() Spec { return c.spec }

// Check checks h against the model (see the package's Check).
func (c Checker[I, O]) Check(ctx context.Context, h []Operation[I, O], opts Options) (Result, error) {
	if c.check == nil {
		return Result{}, errZeroChecker
	}
	return c.check(ctx, h, opts)
}

// DescribeOperation is the model's description of op.
func (c Checker[I, O]) DescribeOperation(op *Operation[I, O]) string {
	if c.describe == nil {
		return describeOperation(op)
	}
	return c.describe(op)
}

// WriteText is the package's WriteText with the model.
func (c Checker[I, O]) WriteText(w io.Writer, h []Operation[I, O], res *Result, p Picture) error {
	if c.draw == nil {
		return errZeroChecker
	}
	return c.draw(w, false, h, res, p)
}

// WriteHTML is the package's WriteHTML with the model.
func (c Checker[I, O]) WriteHTML(w io.Writer, h []Operation[I, O], res *Result, p Picture) error {
	if c.draw == nil {
		return errZeroChecker
	}
	return c.draw(w, true, h, res, p)
}

// errNoKind is the error of a spec whose "kind" is missing.
var errNoKind = errors.New(`missing "kind"`)
