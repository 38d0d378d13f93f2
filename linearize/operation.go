package linearize

import (
	"fmt"
	"math"
)

// Operation is one call recorded in a history: a client invoked Input at
// Call and saw Output at Return.
//
// Times are int64 in one unit for the whole history; by convention
// nanoseconds (time.Time.UnixNano, or nanoseconds since the start of a run),
// and the time-aware models (LeaseModel) read them as nanoseconds. The
// checker only compares times. The interval [Call, Return] is closed: two
// operations that share an end point are concurrent, because a clock that
// may return the same reading twice cannot order them.
//
// An operation with Unknown set timed out or failed in a way that leaves
// its effect undecided: it may have taken effect at any single instant after
// Call (even after Return, when the request was still in flight) or never.
// The checker treats it natively as optional: a linearization may leave it
// out, or place it anywhere after its call; its Output is ignored and the
// model is asked for every state the operation could lead to, whatever it
// would have returned. Return is then only the moment the client stopped
// waiting, kept for pictures; it must still not be before Call.
type Operation[I, O any] struct {
	// ID identifies the operation in pictures and JSON; unique in a history.
	ID int
	// ClientID is the client (process, goroutine) that issued it; not
	// negative. It gives the lanes of the pictures and the unit that
	// shrinking tries to remove first.
	ClientID int
	// Call is when the operation was invoked.
	Call int64
	// Return is when its response arrived (or, for Unknown operations, when
	// the client gave up). Return >= Call.
	Return int64
	// Input is what the client asked for.
	Input I
	// Output is what the client saw; ignored when Unknown.
	Output O
	// Unknown marks an operation whose outcome is unknown (see the type's
	// documentation).
	Unknown bool

	_ struct{} // keyed literals only
}

// End is the latest instant at which op may have taken effect: Return for
// an operation with a known outcome, math.MaxInt64 (no bound) for an
// Unknown one. Time-aware models use it as the upper end of the operation's
// window.
func (op *Operation[I, O]) End() int64 {
	if op.Unknown {
		return math.MaxInt64
	}
	return op.Return
}

// checkOperation reports what is malformed in op, operation i of a history,
// taken alone.
func checkOperation[I, O any](i int, op *Operation[I, O]) error {
	if fault := operationFault(op); fault != "" {
		return fmt.Errorf("%w: operation %d (id %d): %s", ErrInvalidHistory, i, op.ID, fault)
	}
	return nil
}

// operationFault says what is wrong with op on its own, or "".
func operationFault[I, O any](op *Operation[I, O]) string {
	switch {
	case op.Return < op.Call:
		return fmt.Sprintf("return %d is before call %d", op.Return, op.Call)
	case op.ClientID < 0:
		return fmt.Sprintf("negative client id %d", op.ClientID)
	}
	return ""
}

// validateHistory reports the first malformed operation of h.
func validateHistory[I, O any](h []Operation[I, O]) error {
	dense := true // every id in [0, len(h)): duplicates show in a bitset
	for i := range h {
		op := &h[i]
		if err := checkOperation(i, op); err != nil {
			return err
		}
		if uint(op.ID) >= uint(len(h)) {
			dense = false
		}
	}
	if dense {
		seen := make([]uint64, (len(h)+63)/64)
		dup := false
		for i := range h {
			id := uint(h[i].ID)
			if seen[id>>6]&(1<<(id&63)) != 0 {
				dup = true
				break
			}
			seen[id>>6] |= 1 << (id & 63)
		}
		if !dup {
			return nil
		}
	}
	seen := make(map[int]int, len(h))
	for i := range h {
		op := &h[i]
		if j, dup := seen[op.ID]; dup {
			return fmt.Errorf("%w: operations %d and %d share id %d",
				ErrInvalidHistory, j, i, op.ID)
		}
		seen[op.ID] = i
	}
	return nil
}
