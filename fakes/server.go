package fakes

import (
	"context"
	"errors"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// Server is what every backend fake offers, whichever package it lives in
// (redisfake, etcdfake, consulfake, mysqlfake, zkfake): a test or a suite
// written against it runs on any of them.
type Server interface {
	// Addr returns the address clients dial, host:port; a group of
	// servers returns its members' addresses joined by commas.
	Addr() string
	// Close stops the server (or lets go of a real one); a second call
	// does nothing.
	Close() error
	// LockOptions returns the options a lock needs to work on the server:
	// its key prefix and its clock.
	LockOptions() []locks.Option
	// ExpireLock ends the lease of the lock called name now, as its expiry
	// would; with nobody holding it, it returns an error wrapping
	// ErrNoHolder.
	ExpireLock(ctx context.Context, name string) error
	// Real reports whether the server is a real one, not in-process.
	Real() bool
}

// ManualTimer is a Server whose time can run on a manual Clock: each
// backend package's ManualTime option turns it on.
type ManualTimer interface {
	// Clock returns the clock the server's time follows and locks should
	// use: the manual Clock in manual time, locks.SystemClock otherwise.
	Clock() locks.Clock
	// Advance moves the server's time forward by d; without manual time
	// it fails the fake's test (or panics without a test).
	Advance(d time.Duration)
}

// ErrNoHolder is wrapped by the error of a Server's ExpireLock when nobody
// holds the lock, so there is no lease to end: a caller that expires "the
// holder, if any" can tell it from a failure with errors.Is.
var ErrNoHolder = errors.New("nobody holds the lock")

// SessionExpirer is a server whose clients hold their locks through
// sessions (consulfake's, string ids; zkfake's, int64 ids as go-zookeeper's
// Conn.SessionID).
type SessionExpirer[ID comparable] interface {
	// ExpireSession ends session id now, as its timeout would. It returns
	// an error wrapping ErrNoSession when there is no such session, and an
	// error when the server cannot expire another client's session.
	ExpireSession(id ID) error
}

// ErrNoSession is wrapped by the error of ExpireSession when the server
// knows no such session.
var ErrNoSession = errors.New("no such session")
