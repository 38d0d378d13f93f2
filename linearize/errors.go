package linearize

import "errors"

// Sentinel errors. Check and the decoders wrap them with %w and a precise
// message; test with errors.Is.
var (
	// ErrInvalidModel rejects a model with a missing required function (Init,
	// Step) or a state type that needs an Equal function it lacks.
	ErrInvalidModel = errors.New("linearize: invalid model")
	// ErrInvalidHistory rejects a malformed history: Return before Call,
	// duplicate operation IDs, negative client IDs.
	ErrInvalidHistory = errors.New("linearize: invalid history")
	// ErrInvalidOptions rejects negative limits in Options.
	ErrInvalidOptions = errors.New("linearize: invalid options")
	// ErrDecode rejects a JSON history that does not follow the format
	// described in DecodeHistory.
	ErrDecode = errors.New("linearize: malformed JSON history")
	// ErrTimeLimit is the Result.Cause of an Unknown verdict reached because
	// Options.TimeLimit passed.
	ErrTimeLimit = errors.New("linearize: time limit reached")
	// ErrStepLimit is the Result.Cause of an Unknown verdict reached because
	// Options.MaxSteps were spent.
	ErrStepLimit = errors.New("linearize: step limit reached")
	// ErrMemoryLimit is the Result.Cause of an Unknown verdict reached because
	// the memo tables grew past Options.MaxMemory.
	ErrMemoryLimit = errors.New("linearize: memory limit reached")
)

// wrapped is an error with a message of its own that wraps several errors,
// sentinels among them, for errors.Is and errors.As.
type wrapped struct {
	msg  string
	errs []error
}

func (e *wrapped) Error() string   { return e.msg }
func (e *wrapped) Unwrap() []error { return e.errs }
