package locks

import (
	"context"
	"strconv"
)

// Point names a moment in a client's use of a lock at which an Observer is
// called. chaos uses these to pause a client (a GC pause) or to crash it.
type Point uint8

// The points at which locks call their Observer.
const (
	// PointAcquired: the backend granted the lease; Lock or TryLock has not
	// returned yet. A pause here eats into the lease before the caller sees it.
	PointAcquired Point = iota + 1
	// PointBeforeRenew: a renewal (watchdog or explicit) is about to be sent.
	PointBeforeRenew
	// PointBeforeUnlock: Unlock is about to release the lease.
	PointBeforeUnlock
	// PointBeforeWrite is never called by a lock: callers that protect a
	// write (examples, propertytest) report it themselves with Observe, so one
	// Observer sees the whole sequence.
	PointBeforeWrite
	// PointGrantedTooLate: the backend granted, but the lease's local
	// deadline had passed before Lock or TryLock could hand it over (the
	// request or its reply took longer than the TTL). The lock releases
	// it, and Lock waits again; Event.Token is that grant's. A history
	// of the lock (propertytest's) needs it: the grant held the lock for
	// a while, inside a call that returns another grant, or none.
	PointGrantedTooLate
)

// String names the point.
func (p Point) String() string {
	switch p {
	case PointAcquired:
		return "acquired"
	case PointBeforeRenew:
		return "before-renew"
	case PointBeforeUnlock:
		return "before-unlock"
	case PointBeforeWrite:
		return "before-write"
	case PointGrantedTooLate:
		return "granted-too-late"
	}
	return "point(" + strconv.Itoa(int(p)) + ")"
}

// Event is what an Observer is told at a Point.
type Event struct {
	Point Point
	// Name is the lock's name.
	Name string
	// Token is the lease's fencing token, when it has one (Fenced).
	Token  Token
	Fenced bool
}

// Observer is called synchronously at each Point. Blocking in Observe delays
// the client exactly as a stop-the-world pause would. Implementations must be
// safe for concurrent use.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// Observe calls o if it is not nil; locks call it so that an unset observer
// costs one comparison.
func Observe(ctx context.Context, o Observer, e Event) {
	if o != nil {
		o.Observe(ctx, e)
	}
}

// observers calls each of its observers in turn.
type observers []Observer

func (os observers) Observe(ctx context.Context, e Event) {
	for _, o := range os {
		o.Observe(ctx, e)
	}
}

// chainObservers returns an Observer that calls a, then b; either may be
// nil.
func chainObservers(a, b Observer) Observer {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	chain, ok := a.(observers)
	if !ok {
		chain = observers{a}
	}
	return append(chain[:len(chain):len(chain)], b)
}
