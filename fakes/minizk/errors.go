package minizk

import "errors"

// The errors of the Server's controls.
var (
	// ErrClosed is returned by a control of a closed Server.
	ErrClosed = errors.New("minizk: server closed")
	// ErrNoNode is returned by Get and Children for a path with no znode.
	ErrNoNode = errors.New("minizk: no such znode")
	// ErrNotManual is returned by Advance when the Server's clock cannot be
	// moved (it has no Advance method, as the system clock).
	ErrNotManual = errors.New("minizk: clock is not manual")
	// ErrNoSession is returned by controls given an unknown session id.
	ErrNoSession = errors.New("minizk: no such session")
)
