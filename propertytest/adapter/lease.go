package adapter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// ErrNoRenew is the error of Renew on a lease whose library has no
// renewal (Grant.Renew is nil). It wraps errors.ErrUnsupported, which
// propertytest does not count against progress.
var ErrNoRenew = fmt.Errorf("adapter: the library has no renewal: %w", errors.ErrUnsupported)

// lease is the locks.Lease of one Grant; see the package doc for its
// rules.
type lease struct {
	name  string
	o     locks.Options
	grant Grant
	done  chan struct{}

	mu       sync.Mutex
	deadline time.Time
	expiry   locks.Timer
	err      error // why done was closed; nil while held
	unlocked bool
}

var _ locks.Lease = (*lease)(nil)

// newLease starts managing g, granted from start: ended at once if its
// Deadline has passed already.
func newLease(name string, o locks.Options, g Grant, start time.Time) *lease {
	l := &lease{name: name, o: o, grant: g, done: make(chan struct{})}
	l.mu.Lock()
	l.setDeadlineLocked(start)
	l.mu.Unlock()
	if g.Lost != nil {
		go l.watchLost()
	}
	return l
}

// setDeadlineLocked sets the deadline of a grant or renewal that started
// at start: the library's, if it reports one, else start + TTL - Drift.
// It ends the lease if that moment has passed, else arms the expiry.
func (l *lease) setDeadlineLocked(start time.Time) {
	d := start.Add(l.o.TTL - locks.Drift(l.o.TTL))
	if l.grant.Deadline != nil {
		if lib := l.grant.Deadline(); !lib.IsZero() {
			d = lib
		}
	}
	l.deadline = d
	if l.expiry != nil {
		l.expiry.Stop()
	}
	left := d.Sub(l.o.Clock.Now())
	if left <= 0 {
		l.finishLocked(fmt.Errorf("lock %q: %w (deadline %v passed when it was set)", l.name, locks.ErrLeaseExpired, d))
		return
	}
	l.expiry = l.o.Clock.AfterFunc(left, l.expire)
}

// expire ends the lease if its deadline has passed (a renewal may have
// moved it as the timer fired).
func (l *lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expiredLocked()
}

// expiredLocked ends the lease if its deadline has passed, and reports
// whether it is ended.
func (l *lease) expiredLocked() bool {
	if l.err == nil && !l.o.Clock.Now().Before(l.deadline) {
		l.finishLocked(fmt.Errorf("lock %q: %w", l.name, locks.ErrLeaseExpired))
	}
	return l.err != nil
}

// watchLost ends the lease when the library reports it lost; it returns
// once either happened.
func (l *lease) watchLost() {
	select {
	case <-l.done:
	case <-l.grant.Lost:
		l.mu.Lock()
		l.finishLocked(fmt.Errorf("lock %q: %w: the library reported it lost", l.name, locks.ErrNotHeld))
		l.mu.Unlock()
	}
}

// finishLocked closes done with why, once.
func (l *lease) finishLocked(why error) {
	if l.err != nil {
		return
	}
	l.err = why
	close(l.done)
	if l.expiry != nil {
		l.expiry.Stop()
	}
}

func (l *lease) event(p locks.Point) locks.Event {
	return locks.Event{Point: p, Name: l.name, Token: l.grant.Token, Fenced: l.grant.Fenced}
}

// Name returns the lock's name.
func (l *lease) Name() string { return l.name }

// Token returns the grant's token and whether it fences.
func (l *lease) Token() (locks.Token, bool) { return l.grant.Token, l.grant.Fenced }

// Deadline returns the current end of validity.
func (l *lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Done is closed once the lease is released, expired or lost.
func (l *lease) Done() <-chan struct{} { return l.done }

// Err says why Done was closed, or nil while the lease is held. It reads
// the clock, so it is non-nil from the instant the deadline passes, before
// the expiry timer has run; it then ends the lease, closing Done.
func (l *lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expiredLocked()
	return l.err
}

// usable returns the error that forbids using the lease, or nil.
func (l *lease) usable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unlocked {
		return fmt.Errorf("lock %q: %w", l.name, locks.ErrReleased)
	}
	l.expiredLocked()
	return l.err
}

// Renew calls the library's renewal, unless the lease is over, and moves
// the deadline from the moment it was called.
func (l *lease) Renew(ctx context.Context) error {
	if err := l.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lock %q: renew: %w", l.name, err)
	}
	if l.grant.Renew == nil {
		return fmt.Errorf("lock %q: renew: %w", l.name, ErrNoRenew)
	}
	locks.Observe(ctx, l.o.Observer, l.event(locks.PointBeforeRenew))
	start := l.o.Clock.Now()
	err := l.grant.Renew(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case errors.Is(err, locks.ErrNotHeld):
		err = fmt.Errorf("lock %q: renew: %w", l.name, err)
		l.finishLocked(err)
		return err
	case err != nil:
		return fmt.Errorf("lock %q: renew: %w", l.name, err)
	case l.err == nil:
		l.setDeadlineLocked(start)
	}
	return nil
}

// Unlock releases the lease through the library, even past its deadline
// (the release is owner-checked); see locks.Lease for the errors.
func (l *lease) Unlock(ctx context.Context) error {
	locks.Observe(ctx, l.o.Observer, l.event(locks.PointBeforeUnlock))
	prior := l.usable()
	if errors.Is(prior, locks.ErrReleased) {
		return prior
	}
	l.mu.Lock()
	l.unlocked = true
	l.finishLocked(fmt.Errorf("lock %q: %w", l.name, locks.ErrReleased))
	l.mu.Unlock()
	if err := ctx.Err(); err != nil {
		if prior != nil {
			return prior
		}
		return fmt.Errorf("lock %q: unlock: %w (left to expire by TTL)", l.name, err)
	}
	err := l.grant.Release(ctx)
	switch {
	case prior != nil:
		return prior
	case err != nil:
		return fmt.Errorf("lock %q: unlock: %w", l.name, err)
	}
	return nil
}
