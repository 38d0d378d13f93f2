package propertytest

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/lockproof/lockproof/linearize"
)

// The models a Violation's Evidence names, as `lockproof history -model`
// spells them.
const (
	// ModelLease is linearize.NewLeaseModel: the lock history.
	ModelLease = "lease"
	// ModelLeaseFromCall is linearize.NewLeaseFromCallModel: the lock
	// history of a lock whose lease runs from its call
	// (Backend.LeaseFromCall).
	ModelLeaseFromCall = "lease-from-call"
	// ModelFenced is linearize.NewFencedRegisterModel: the shared register
	// of a lock whose every lease carried a fencing token.
	ModelFenced = "fenced"
	// ModelRegister is linearize.NewRegisterModel: the shared register of
	// a lock without fencing tokens.
	ModelRegister = "register"
	// ModelSemaphore is linearize.NewSemaphoreModel: the lock history of a
	// lock of Options.Permits > 1 leases at once.
	ModelSemaphore = "semaphore"
	// ModelRWLock is linearize.NewRWLeaseModel: the lock history of a
	// read-write lock (Options.ReadWrite).
	ModelRWLock = "rwlock"
)

// Evidence is the history a Violation rests on and what the checker found
// in it, as data: a program renders it (WriteHTML), writes it in
// linearize's JSON format for `lockproof history` (WriteJSON), or checks it
// again. A named check's finding (a lost update, a lease lost without Done
// closing, ...) carries the whole lock history with the lease checker's
// result on it, which may be Ok: the model does not see what the named
// check saw.
type Evidence struct {
	// Model is ModelLease, ModelLeaseFromCall, ModelSemaphore, ModelRWLock,
	// ModelFenced or ModelRegister:
	// which of the fields below holds the history.
	Model string
	// TTL and Tolerance are the lease, semaphore and read-write models' (lockproof
	// history's -ttl and -tolerance). Zero for the register models.
	TTL, Tolerance time.Duration
	// Permits is the semaphore model's number of permits; zero for the
	// other models.
	Permits int
	// Lease is the lock history (ModelLease, ModelLeaseFromCall,
	// ModelSemaphore, ModelRWLock), times in
	// nanoseconds on the backend's clock.
	Lease []linearize.Operation[linearize.LeaseInput, linearize.LeaseOutput]
	// Fenced is the shared register's history (ModelFenced). Its values
	// are strings, as lockproof history reads them: the suite's counter
	// value n is written strconv.Itoa(n), except 0, the initial value,
	// which is "", the initial value of the model lockproof history
	// checks against (a one-to-one renaming, so the verdict is the same).
	Fenced []linearize.Operation[linearize.FencedInput[string], linearize.FencedOutput[string]]
	// Register is the shared register's history (ModelRegister), values
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

// picture is how the evidence is drawn.
func (e *Evidence) picture() linearize.Picture {
	p := linearize.Picture{All: e.All, Unit: time.Nanosecond, LeaseTTL: e.TTL, LeaseTolerance: e.Tolerance, Expected: e.Expected}
	if e.Model == ModelSemaphore || e.Model == ModelRWLock {
		// The picture marks two owners' lease windows that overlap, which
		// a semaphore and readers allow: no windows.
		p.LeaseTTL, p.LeaseTolerance = 0, 0
	}
	return p
}

// WriteJSON writes the history in linearize's JSON format
// (linearize.EncodeHistory), which `lockproof history` reads (with
// HistoryArgs).
func (e *Evidence) WriteJSON(w io.Writer) error {
	switch e.Model {
	case ModelLease, ModelLeaseFromCall, ModelSemaphore, ModelRWLock:
		return linearize.EncodeHistory(w, e.Lease)
	case ModelFenced:
		return linearize.EncodeHistory(w, e.Fenced)
	case ModelRegister:
		return linearize.EncodeHistory(w, e.Register)
	}
	return fmt.Errorf("propertytest: evidence of unknown model %q", e.Model)
}

// WriteHTML writes the self-contained HTML timeline of the history and the
// result (linearize.WriteHTML).
func (e *Evidence) WriteHTML(w io.Writer) error {
	switch e.Model {
	case ModelLease:
		model, err := linearize.NewLeaseModel(e.TTL, e.Tolerance)
		if err != nil {
			return err
		}
		return linearize.WriteHTML(w, model, e.Lease, &e.Result, e.picture())
	case ModelLeaseFromCall:
		model, err := linearize.NewLeaseFromCallModel(e.TTL, e.Tolerance)
		if err != nil {
			return err
		}
		return linearize.WriteHTML(w, model, e.Lease, &e.Result, e.picture())
	case ModelSemaphore:
		model, err := linearize.NewSemaphoreModel(e.Permits, e.TTL, e.Tolerance)
		if err != nil {
			return err
		}
		return linearize.WriteHTML(w, model, e.Lease, &e.Result, e.picture())
	case ModelRWLock:
		model, err := linearize.NewRWLeaseModel(e.TTL, e.Tolerance)
		if err != nil {
			return err
		}
		return linearize.WriteHTML(w, model, e.Lease, &e.Result, e.picture())
	case ModelFenced:
		return linearize.WriteHTML(w, linearize.NewFencedRegisterModel(""), e.Fenced, &e.Result, e.picture())
	case ModelRegister:
		return linearize.WriteHTML(w, linearize.NewRegisterModel(""), e.Register, &e.Result, e.picture())
	}
	return fmt.Errorf("propertytest: evidence of unknown model %q", e.Model)
}

// HistoryArgs are the flags of `lockproof history` that check the JSON
// WriteJSON writes against the same model, before the file's name.
func (e *Evidence) HistoryArgs() []string {
	args := []string{"-model", e.Model}
	switch e.Model {
	case ModelLease, ModelLeaseFromCall, ModelRWLock:
		args = append(args, "-ttl", e.TTL.String(), "-tolerance", e.Tolerance.String())
	case ModelSemaphore:
		args = append(args, "-permits", strconv.Itoa(e.Permits), "-ttl", e.TTL.String(), "-tolerance", e.Tolerance.String())
	}
	return args
}
