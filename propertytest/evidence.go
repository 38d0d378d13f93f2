package propertytest

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/lockproof/lockproof/linearize"
)

// Evidence is the history a Violation rests on and what the checker found
// in it, as data: a program renders it (WriteHTML, WriteText), writes it as
// a history file that names its model (WriteJSON, which `lockproof
// history` reads), or checks it again. A named check's finding (a lost
// update, a lease lost without Done closing, ...) carries the whole lock
// history with the lease checker's result on it, which may be Ok: the
// model does not see what the named check saw.
type Evidence struct {
	// Model is the model the history was checked against, as the run
	// recorded it: a lease model (KindLease, KindSemaphore, KindRWLock)
	// for the lock history in Lease, KindFenced for Fenced, KindRegister
	// for Register.
	Model linearize.Spec
	// Lease is the lock history (a lease model), times in nanoseconds on
	// the backend's clock.
	Lease []linearize.Operation[linearize.LeaseInput, linearize.LeaseOutput]
	// Fenced is the shared register's history (KindFenced). Its values
	// are strings, as linearize.Spec's register models check them: the
	// counter value n is strconv.Itoa(n), except 0, which is "", those
	// models' initial value (a renaming, so the verdict is the same).
	Fenced []linearize.Operation[linearize.FencedInput[string], linearize.FencedOutput[string]]
	// Register is the shared register's history (KindRegister), values
	// renamed as in Fenced.
	Register []linearize.Operation[linearize.RegisterInput[string], linearize.RegisterOutput[string]]
	// Result is the checker's result on the history.
	Result linearize.Result
	// All draws every operation: a named check's finding is not in a
	// counterexample.
	All bool
	// Expected heads the picture as an expected violation.
	Expected bool

	_ struct{} // keyed literals only
}

// registerValue renames the suite's register value v as Evidence.Fenced
// says.
func registerValue(v int) string {
	if v == 0 {
		return ""
	}
	return strconv.Itoa(v)
}

// fencedEvidence is the evidence of a fenced register history.
func fencedEvidence(h []regOp) []linearize.Operation[linearize.FencedInput[string], linearize.FencedOutput[string]] {
	out := make([]linearize.Operation[linearize.FencedInput[string], linearize.FencedOutput[string]], len(h))
	for i, op := range h {
		out[i] = linearize.Operation[linearize.FencedInput[string], linearize.FencedOutput[string]]{
			ID: op.ID, ClientID: op.ClientID, Call: op.Call, Return: op.Return, Unknown: op.Unknown,
			Input:  linearize.FencedInput[string]{Op: op.Input.Op, Token: op.Input.Token, Value: registerValue(op.Input.Value)},
			Output: linearize.FencedOutput[string]{OK: op.Output.OK, Value: registerValue(op.Output.Value)},
		}
	}
	return out
}

// plainEvidence is the evidence of an unfenced register history: the
// tokens, all zero, left out.
func plainEvidence(h []regOp) []linearize.Operation[linearize.RegisterInput[string], linearize.RegisterOutput[string]] {
	out := make([]linearize.Operation[linearize.RegisterInput[string], linearize.RegisterOutput[string]], len(h))
	for i, op := range h {
		out[i] = linearize.Operation[linearize.RegisterInput[string], linearize.RegisterOutput[string]]{
			ID: op.ID, ClientID: op.ClientID, Call: op.Call, Return: op.Return,
			Input:  linearize.RegisterInput[string]{Op: op.Input.Op, Value: registerValue(op.Input.Value)},
			Output: linearize.RegisterOutput[string]{Value: registerValue(op.Output.Value)},
		}
	}
	return out
}

// picture is how the evidence is drawn; the model adds its lease windows.
func (e *Evidence) picture() linearize.Picture {
	return linearize.Picture{All: e.All, Unit: time.Nanosecond, Expected: e.Expected}
}

// file is the history the evidence holds (Fenced, Register, else Lease)
// with its model.
func (e *Evidence) file() (*linearize.File, error) {
	var f *linearize.File
	var err error
	switch {
	case e.Fenced != nil:
		f, err = linearize.NewFile(e.Model, e.Fenced)
	case e.Register != nil:
		f, err = linearize.NewFile(e.Model, e.Register)
	default:
		f, err = linearize.NewFile(e.Model, e.Lease)
	}
	if err != nil {
		return nil, fmt.Errorf("propertytest: evidence: %w", err)
	}
	return f, nil
}

// WriteJSON writes the history as a history file that names its model
// (linearize.EncodeFile), which `lockproof history` and linearize.ReadFile
// read.
func (e *Evidence) WriteJSON(w io.Writer) error {
	f, err := e.file()
	if err != nil {
		return err
	}
	return f.WriteJSON(w)
}

// WriteHTML writes the self-contained HTML timeline of the history and the
// result (linearize.WriteHTML).
func (e *Evidence) WriteHTML(w io.Writer) error {
	f, err := e.file()
	if err != nil {
		return err
	}
	return f.WriteHTML(w, &e.Result, e.picture())
}

// WriteText writes the timeline of the history and the result for a
// terminal (linearize.WriteText).
func (e *Evidence) WriteText(w io.Writer) error {
	f, err := e.file()
	if err != nil {
		return err
	}
	return f.WriteText(w, &e.Result, e.picture())
}
