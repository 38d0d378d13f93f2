package locks

import "errors"

// Sentinel errors shared by every lock in lockproof. Backend errors are wrapped
// with %w around these, so callers test them with errors.Is.
var (
	// ErrLocked is returned by TryLock when another owner holds the lock.
	ErrLocked = errors.New("locks: held by another owner")
	// ErrNotHeld means the backend no longer records this lease's owner as the
	// holder: a foreign owner, a lease taken over after expiry, or one already
	// released on the backend.
	ErrNotHeld = errors.New("locks: lease not held by this owner")
	// ErrLeaseExpired means the lease's validity ran out (by the local,
	// conservative estimate) before it was renewed or released.
	ErrLeaseExpired = errors.New("locks: lease expired")
	// ErrReleased is returned when a lease that was already unlocked is used
	// again: a double Unlock, or Renew after Unlock.
	ErrReleased = errors.New("locks: lease already released")
	// ErrMaxHold means the lease reached the longest hold set with
	// WithMaxHold: it stopped renewing, closed Done and released the lock on
	// the backend, whatever the watchdog would have done.
	ErrMaxHold = errors.New("locks: maximum hold time reached")
	// ErrWaitBudget is returned by Lock when the wait budget set with
	// WithWaitBudget ran out before the lock was acquired.
	ErrWaitBudget = errors.New("locks: wait budget exhausted")
	// ErrNoQuorum is returned by multi-node locks that could not reach a
	// majority of their nodes in time.
	ErrNoQuorum = errors.New("locks: no quorum")
	// ErrInvalidName rejects an empty or malformed lock name.
	ErrInvalidName = errors.New("locks: invalid lock name")
	// ErrInvalidTTL rejects a TTL that is not positive or too short to be
	// useful once clock drift is accounted for.
	ErrInvalidTTL = errors.New("locks: invalid TTL")
	// ErrInvalidOption rejects any other option value out of range.
	ErrInvalidOption = errors.New("locks: invalid option")
	// ErrNilClient rejects a nil backend client.
	ErrNilClient = errors.New("locks: nil client")
	// ErrStaleToken is returned by a Fence offered a token lower than the
	// highest it has seen.
	ErrStaleToken = errors.New("locks: stale fencing token")
	// ErrNoFencing is returned where a fencing token is required but the lease
	// cannot give a safe one (Redlock).
	ErrNoFencing = errors.New("locks: lease has no fencing token")
)
