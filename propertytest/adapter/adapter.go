package adapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// Lock is a lock written elsewhere, described by the functions New needs.
// Lock is required, and one of TryLock and WouldWait.
//
// Without TryLock, the kit's TryLock runs Lock and cancels its context
// just before the first request WouldWait names as a wait; once Lock has
// returned it reports an error wrapping locks.ErrLocked. Should Lock
// return a grant all the same, the kit releases it and reports an error
// that is not ErrLocked: the client did hold the lock for a while.
type Lock struct {
	// Lock waits until the library grants the lock, with its own blocking
	// call, or until ctx ends.
	Lock func(ctx context.Context) (Grant, error)
	// TryLock makes the library's single attempt; its "held by another"
	// answer should be wrapped with Locked. Nil when the library has none:
	// WouldWait then makes one out of Lock.
	TryLock func(ctx context.Context) (Grant, error)
	// WouldWait reports whether next, a request Lock is about to send
	// within a TryLock after the requests sent (named as the client's gate
	// hook names them, see locks.Gate), starts a wait: a blocking query, a
	// poller's second attempt. Used only when TryLock is nil.
	WouldWait func(sent []string, next string) bool
	// Grants, optional, names the requests that may grant the lock (a SET
	// NX, an acquire). The moment the last of them was let go within the
	// call that granted is then the grant's start, unless Grant.Start is
	// set. Name none that the call sends after the one that granted.
	Grants func(what string) bool
}

// Grant is one acquisition the library made, as Lock.Lock or Lock.TryLock
// return it. Release is required.
type Grant struct {
	// Release releases the acquisition, owner-checked; its "not held"
	// answer should be wrapped with NotHeld.
	Release func(ctx context.Context) error
	// Renew extends the acquisition by the TTL; nil when the library has
	// no renewal, and the lease's Renew then fails with ErrNoRenew.
	Renew func(ctx context.Context) error
	// Token is the fencing token, valid when Fenced.
	Token  locks.Token
	Fenced bool
	// Start, if set, is the grant's start: a moment on the Options' Clock
	// no later than the request that set the lease on the backend (a
	// poller's last attempt). It replaces the moments the kit notes.
	Start time.Time
	// Deadline, if set, returns the library's own end of validity on the
	// Options' Clock; it is read after the grant and after each successful
	// renewal, and a zero time falls back to the kit's rule.
	Deadline func() time.Time
	// Lost, if set, is closed when the library reports the lock lost (a
	// session invalidated): the lease's Err then wraps locks.ErrNotHeld.
	Lost <-chan struct{}
}

// New returns the Locker of one client of a lock described by lock, for
// the lock called name, with o, the result of locks.Resolve: its Clock,
// TTL and Observer are the leases'. o must have the watchdog off and no
// MaxHold (the kit's leases do not renew themselves).
func New(name string, o locks.Options, lock Lock) (locks.Locker, error) {
	switch {
	case lock.Lock == nil:
		return nil, errors.New("adapter: Lock.Lock is required")
	case lock.TryLock == nil && lock.WouldWait == nil:
		return nil, errors.New("adapter: Lock needs TryLock, or WouldWait to make one from Lock")
	case o.Clock == nil || o.TTL < locks.MinTTL:
		return nil, fmt.Errorf("adapter: options without a clock or with TTL %v: build them with locks.Resolve", o.TTL)
	case o.Watchdog:
		return nil, errors.New("adapter: the watchdog is on, and the kit's leases do not renew themselves: pass locks.WithWatchdog(false)")
	case o.MaxHold > 0:
		return nil, fmt.Errorf("adapter: MaxHold %v is not supported", o.MaxHold)
	}
	return &locker{name: name, o: o, lock: lock}, nil
}

// locker is the Locker New returns.
type locker struct {
	name string
	o    locks.Options
	lock Lock
}

var _ locks.Locker = (*locker)(nil)

// Lock waits with the library's blocking call.
func (l *locker) Lock(ctx context.Context) (locks.Lease, error) {
	return l.acquire(ctx, l.lock.Lock, nil)
}

// TryLock makes the library's single attempt, or runs its Lock until the
// first request WouldWait names.
func (l *locker) TryLock(ctx context.Context) (locks.Lease, error) {
	if l.lock.TryLock != nil {
		return l.acquire(ctx, l.lock.TryLock, nil)
	}
	return l.acquire(ctx, l.lock.Lock, l.lock.WouldWait)
}

// acquire runs call, under a callGate when the grant's start is to be
// noted or wouldWait is to end it, and makes a lease of its grant.
func (l *locker) acquire(ctx context.Context, call func(context.Context) (Grant, error), wouldWait func([]string, string) bool) (locks.Lease, error) {
	began := l.o.Clock.Now()
	var g *callGate
	cctx := ctx
	if l.lock.Grants != nil || wouldWait != nil {
		// The call's context lives as long as ctx unless the attempt is
		// given up: a library may keep it for what it started in the call.
		var cancel context.CancelFunc
		cctx, cancel = context.WithCancel(ctx)
		g = &callGate{outer: locks.GateOf(ctx), clock: l.o.Clock, grants: l.lock.Grants, wouldWait: wouldWait, cancel: cancel}
		cctx = locks.WithGate(cctx, g)
	}
	grant, err := call(cctx)
	gaveUp, what := g.gaveUpAt()
	switch {
	case gaveUp && err == nil && grant.Release != nil:
		// The library was granted as the attempt gave up: it did hold the
		// lock for a while, so this is no refusal.
		rctx, cancel := locks.RequestContext(context.WithoutCancel(ctx), l.o.RequestTimeout)
		rerr := grant.Release(rctx)
		cancel()
		return nil, fmt.Errorf("adapter: lock %q: granted as TryLock gave up before %q; released (%v)", l.name, what, rerr)
	case gaveUp && ctx.Err() == nil:
		return nil, fmt.Errorf("adapter: lock %q: %w: Lock would wait (%s): %w", l.name, locks.ErrLocked, what, errGaveUp)
	case err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		return nil, fmt.Errorf("adapter: lock %q: %w (%w)", l.name, ctx.Err(), err)
	case err != nil:
		return nil, err
	case grant.Release == nil:
		return nil, fmt.Errorf("adapter: lock %q: the library's grant has no Release", l.name)
	}
	start := began
	if s := g.stamped(); !s.IsZero() {
		start = s
	}
	if !grant.Start.IsZero() {
		start = grant.Start
	}
	ls := newLease(l.name, l.o, grant, start)
	locks.Observe(ctx, l.o.Observer, ls.event(locks.PointAcquired))
	return ls, nil
}

// errGaveUp is the cause in the error of a TryLock that gave up.
var errGaveUp = errors.New("the attempt was given up")

// callGate is the locks.Gate the kit puts in the context of a call to the
// library: it passes every request on to the outer Gate, notes when the
// requests Grants names were let go, and ends a TryLock at the first
// request WouldWait names.
type callGate struct {
	outer     locks.Gate
	clock     locks.Clock
	grants    func(string) bool
	wouldWait func([]string, string) bool
	cancel    context.CancelFunc

	mu     sync.Mutex
	sent   []string
	at     time.Time // when the last request Grants names was let go
	gaveUp string    // the request the attempt gave up before; "" while on
	ended  bool
}

var _ locks.Gate = (*callGate)(nil)

// Request lets what go through the outer Gate, or ends the attempt before
// it: the call's context is then cancelled, and the fakes' hooks send no
// request whose context ended.
func (g *callGate) Request(ctx context.Context, what string) func() {
	g.mu.Lock()
	if g.ended || (g.wouldWait != nil && g.wouldWait(slices.Clip(g.sent), what)) {
		if !g.ended {
			g.ended, g.gaveUp = true, what
		}
		g.mu.Unlock()
		g.cancel()
		return func() {}
	}
	g.sent = append(g.sent, what)
	g.mu.Unlock()
	done := func() {}
	if g.outer != nil {
		if d := g.outer.Request(ctx, what); d != nil {
			done = d
		}
	}
	if g.grants != nil && g.grants(what) {
		now := g.clock.Now() // let go, not yet sent
		g.mu.Lock()
		if now.After(g.at) {
			g.at = now
		}
		g.mu.Unlock()
	}
	return done
}

// gaveUpAt reports whether the attempt was given up, and before which
// request. A nil gate never gives up.
func (g *callGate) gaveUpAt() (bool, string) {
	if g == nil {
		return false, ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ended, g.gaveUp
}

// stamped is when the last request Grants names was let go, or zero.
func (g *callGate) stamped() time.Time {
	if g == nil {
		return time.Time{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.at
}
