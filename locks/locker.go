package locks

import (
	"context"
	"strconv"
	"time"
)

// Locker acquires one named lock on one backend. A Locker is safe for
// concurrent use; every successful Lock or TryLock returns a distinct Lease
// with its own random owner value.
type Locker interface {
	// Lock waits until the lock is held, ctx ends, the wait budget runs out
	// (ErrWaitBudget) or the backend fails in a way retrying cannot fix.
	// Cancellation returns an error wrapping ctx.Err().
	Lock(ctx context.Context) (Lease, error)
	// TryLock makes one attempt. It returns ErrLocked (wrapped) when another
	// owner holds the lock.
	TryLock(ctx context.Context) (Lease, error)
}

// Lease is one acquisition of a lock. It is valid until Deadline unless
// renewed; after Unlock, or once Done is closed, it must not be used to
// protect anything.
type Lease interface {
	// Name is the lock's name.
	Name() string
	// Token returns the fencing token of this acquisition. Tokens of one lock
	// name strictly increase from one acquisition to the next. ok is false when
	// the backend cannot give a token with that guarantee (Redlock): callers
	// must then not rely on fencing.
	Token() (tok Token, ok bool)
	// Deadline is the local, conservative end of the lease's validity: the
	// time the acquiring (or last renewing) request was sent, plus the TTL,
	// minus the allowance for clock drift (see Drift). It moves forward on
	// every successful renewal.
	Deadline() time.Time
	// Renew extends the lease by its TTL. It returns ErrNotHeld when the
	// backend no longer records this owner, ErrLeaseExpired after the
	// validity ran out, and ErrReleased after Unlock.
	Renew(ctx context.Context) error
	// Unlock releases the lease, owner-checked: it never releases another
	// owner's lease. It returns ErrReleased on a second call, ErrLeaseExpired
	// when the lease had expired, ErrNotHeld when the backend had already
	// given the lock to someone else. After Unlock the lease is finished
	// whatever the result: a backend error leaves the key to expire by TTL.
	Unlock(ctx context.Context) error
	// Done is closed once the lease is released, expired or known lost.
	Done() <-chan struct{}
	// Err says why Done was closed: nil while the lease is held, then
	// ErrReleased, ErrLeaseExpired or an error wrapping ErrNotHeld. Once
	// it is non-nil it stays so, and Done is closed. ManagedLease's Err
	// reads its clock, so it is non-nil from the instant Deadline passes.
	Err() error
}

// Token is a fencing token: a number that strictly increases with every
// acquisition of one lock name. A resource that remembers the highest token
// it has seen and refuses lower ones (see Fence) cannot be corrupted by a
// holder whose lease ran out while it was paused.
type Token uint64

// String formats the token in decimal.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }
