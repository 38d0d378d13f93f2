package locks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// LeaseOps is what a backend supplies to NewLease: the two owner-checked
// operations on one acquisition. Both must return an error wrapping
// ErrNotHeld when the backend no longer records this owner.
type LeaseOps interface {
	// Renew extends the acquisition on the backend by the TTL.
	Renew(ctx context.Context) error
	// Release removes the acquisition from the backend.
	Release(ctx context.Context) error
}

// LeaseSpec describes a granted acquisition for NewLease.
type LeaseSpec struct {
	Name   string
	Token  Token
	Fenced bool
	// Start is when the request that granted the lease was sent, by the
	// clock of the Options given to NewLease. The backend set its TTL after
	// this moment, so Start + TTL - Drift(TTL) is a safe local deadline.
	Start time.Time
}

// ManagedLease implements Lease over a backend's LeaseOps: the local
// deadline, the watchdog, Done and Err, and the rules for double unlock and
// use after expiry. Every lock in lockproof returns one; other lock authors
// may too.
//
// Err, Renew, Unlock and GiveBackIfLate compare the lease's clock
// (Options.Clock) with Deadline themselves, so they are right the instant
// it passes, before the expiry timer has run; the first of them (or the
// timer, or the watchdog) to see it passed ends the lease and closes Done,
// and an ended lease stays ended. A renewal moves the deadline under the
// same mutex, and only if the lease has not ended when its answer comes
// back: once Err has reported the lease over, no renewal makes it valid
// again. (One whose answer comes back past the deadline before anything
// saw it pass does extend the lease: the backend renewed it owner-checked,
// so the lock was never free meanwhile.)
type ManagedLease struct {
	spec LeaseSpec
	ops  LeaseOps
	opt  Options
	done chan struct{}
	wg   sync.WaitGroup // watchdog renewals in flight

	mu        sync.Mutex
	lastStart time.Time // when the last successful (re)grant was sent
	deadline  time.Time
	maxEnd    time.Time // spec.Start + Options.MaxHold; zero without a bound
	err       error     // why done was closed; nil while held
	unlocked  bool
	released  bool     // the release sent at the max hold succeeded
	onFinish  []func() // called once done is closed (see afterDone)
	expiry    Timer
	watchdog  Timer
	cancelWD  context.CancelFunc
}

var _ Lease = (*ManagedLease)(nil)

// NewLease starts managing a granted acquisition: Done closes at the
// deadline unless the lease is renewed, and with o.Watchdog the lease renews
// itself every TTL/3. With o.MaxHold the lease ends o.MaxHold after
// spec.Start whatever the watchdog does (see WithMaxHold). o must come from
// Resolve.
func NewLease(spec LeaseSpec, ops LeaseOps, o Options) *ManagedLease {
	l := &ManagedLease{spec: spec, ops: ops, opt: o, done: make(chan struct{})}
	if o.MaxHold > 0 {
		l.maxEnd = spec.Start.Add(o.MaxHold)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.extendLocked(spec.Start)
	if !l.opt.Clock.Now().Before(l.deadline) {
		l.endLocked(" before it was handed over")
		return l
	}
	if o.Watchdog {
		l.scheduleWatchdogLocked(0)
	}
	return l
}

// GiveBackIfLate is for a lock about to hand a new lease over: it returns
// nil while the lease is valid. A lease whose deadline passed before it
// could be handed over (NewLease found it so) is reported to the
// Observer at PointGrantedTooLate, released (owner-checked, on a context
// that ctx's cancellation does not end), and its Err, which wraps
// ErrLeaseExpired, is returned: the lock must not return it as held.
func (l *ManagedLease) GiveBackIfLate(ctx context.Context) error {
	err := l.Err()
	if err == nil {
		return nil
	}
	Observe(ctx, l.opt.Observer, l.event(PointGrantedTooLate))
	_ = l.Unlock(context.WithoutCancel(ctx))
	return err
}

// Name returns the lock's name.
func (l *ManagedLease) Name() string { return l.spec.Name }

// Token returns the fencing token and whether it is a safe one.
func (l *ManagedLease) Token() (Token, bool) { return l.spec.Token, l.spec.Fenced }

// Done is closed once the lease is released, expired or lost.
func (l *ManagedLease) Done() <-chan struct{} { return l.done }

// Deadline returns the current local end of validity.
func (l *ManagedLease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Err says why Done was closed, or nil while the lease is held. It reads
// the clock: from the instant the deadline passes it returns an error
// wrapping ErrLeaseExpired (ErrMaxHold at the max hold's end), and closes
// Done if the expiry timer has not yet.
func (l *ManagedLease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkLocked()
}

// checkLocked ends the lease if its clock has reached the deadline, and
// returns why it is over, or nil while it is held.
func (l *ManagedLease) checkLocked() error {
	if l.err == nil && !l.opt.Clock.Now().Before(l.deadline) {
		l.endLocked("")
	}
	return l.err
}

func (l *ManagedLease) event(p Point) Event {
	return Event{Point: p, Name: l.spec.Name, Token: l.spec.Token, Fenced: l.spec.Fenced}
}

// extendLocked moves the deadline to start+TTL-drift, or to the max hold's
// end if that comes first (never backwards), and re-arms the expiry timer.
func (l *ManagedLease) extendLocked(start time.Time) {
	d := start.Add(l.opt.TTL - Drift(l.opt.TTL))
	if !l.maxEnd.IsZero() && d.After(l.maxEnd) {
		d = l.maxEnd
	}
	if !d.After(l.deadline) {
		return
	}
	l.lastStart, l.deadline = start, d
	if l.expiry != nil {
		l.expiry.Stop()
	}
	l.expiry = l.opt.Clock.AfterFunc(d.Sub(l.opt.Clock.Now()), l.expire)
}

func (l *ManagedLease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.checkLocked()
}

// endLocked finishes a lease whose deadline has passed: with ErrMaxHold, and
// a release sent once Done is closed, when the deadline was the max hold's
// end; with ErrLeaseExpired otherwise. how is appended to the reason.
func (l *ManagedLease) endLocked(how string) {
	if l.maxEnd.IsZero() || l.deadline.Before(l.maxEnd) {
		l.finishLocked(fmt.Errorf("lock %q: %w%s", l.spec.Name, ErrLeaseExpired, how))
		return
	}
	l.finishLocked(fmt.Errorf("lock %q: %w (%v)%s", l.spec.Name, ErrMaxHold, l.opt.MaxHold, how))
	l.wg.Add(1)
	go l.releaseAtMaxHold()
}

// releaseAtMaxHold releases the lock on the backend after the max hold
// closed Done, bounded by the request timeout; Unlock waits for it.
func (l *ManagedLease) releaseAtMaxHold() {
	defer l.wg.Done()
	ctx, cancel := RequestContext(context.Background(), l.opt.RequestTimeout)
	defer cancel()
	err := l.ops.Release(ctx)
	if err != nil {
		l.opt.Logger.Warn("lockproof: release at max hold failed; the lock expires by its TTL", "lock", l.spec.Name, "err", err)
	}
	l.mu.Lock()
	l.released = err == nil
	l.mu.Unlock()
}

// afterDone calls f once Done is closed: at once if it is, else from the
// goroutine that closes it, with the lease's mutex held (f must not call
// the lease).
func (l *ManagedLease) afterDone(f func()) {
	l.mu.Lock()
	if l.err == nil {
		l.onFinish = append(l.onFinish, f)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	f()
}

// finishLocked closes Done with reason, once, and stops all timers.
func (l *ManagedLease) finishLocked(reason error) {
	if l.err != nil {
		return
	}
	l.err = reason
	close(l.done)
	if l.expiry != nil {
		l.expiry.Stop()
	}
	if l.watchdog != nil {
		l.watchdog.Stop()
	}
	if l.cancelWD != nil {
		l.cancelWD()
	}
	for _, f := range l.onFinish {
		f()
	}
	l.onFinish = nil
}

// scheduleWatchdogLocked arms the next renewal: at lastStart+TTL/3, or after
// retry when retry > 0. It arms none once the deadline is the max hold's
// end, or the renewal would come at or after it: the lease is not renewed
// past its max hold.
func (l *ManagedLease) scheduleWatchdogLocked(retry time.Duration) {
	d := retry
	if d == 0 {
		d = l.lastStart.Add(l.opt.TTL / 3).Sub(l.opt.Clock.Now())
	}
	if !l.maxEnd.IsZero() && (!l.deadline.Before(l.maxEnd) || !l.opt.Clock.Now().Add(d).Before(l.maxEnd)) {
		return
	}
	l.watchdog = l.opt.Clock.AfterFunc(max(d, 0), l.watchdogFire)
}

func (l *ManagedLease) watchdogFire() {
	l.mu.Lock()
	if l.checkLocked() != nil {
		l.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancelWD = cancel
	l.wg.Add(1)
	l.mu.Unlock()
	defer l.wg.Done()
	defer cancel()

	err := l.renew(ctx)

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	switch {
	case err == nil:
		l.scheduleWatchdogLocked(0)
	case errors.Is(err, ErrNotHeld):
		l.finishLocked(err)
	default:
		left := l.deadline.Sub(l.opt.Clock.Now())
		if left <= l.opt.RequestTimeout {
			l.finishLocked(fmt.Errorf("lock %q: %w: cannot renew in time: %w", l.spec.Name, ErrLeaseExpired, err))
			return
		}
		l.opt.Logger.Warn("lockproof: renewal failed, retrying", "lock", l.spec.Name, "err", err, "left", left)
		l.scheduleWatchdogLocked(min(l.opt.TTL/10, left/4))
	}
}

// renew sends one renewal and, on success, extends the deadline from the
// moment it was sent, unless the lease ended meanwhile (Err saw its
// deadline pass, the timer ran, Unlock): an ended lease stays ended. It
// returns the backend's answer either way.
func (l *ManagedLease) renew(ctx context.Context) error {
	Observe(ctx, l.opt.Observer, l.event(PointBeforeRenew))
	start := l.opt.Clock.Now()
	if err := l.ops.Renew(ctx); err != nil {
		return fmt.Errorf("lock %q: renew: %w", l.spec.Name, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.extendLocked(start)
	}
	return nil
}

// Renew extends the lease by its TTL.
func (l *ManagedLease) Renew(ctx context.Context) error {
	if err := l.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lock %q: renew: %w", l.spec.Name, err)
	}
	err := l.renew(ctx)
	if errors.Is(err, ErrNotHeld) {
		l.mu.Lock()
		l.finishLocked(err)
		l.mu.Unlock()
	}
	return err
}

// usable returns the error that forbids using the lease, or nil.
func (l *ManagedLease) usable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unlocked {
		return fmt.Errorf("lock %q: %w", l.spec.Name, ErrReleased)
	}
	return l.checkLocked()
}

// Unlock releases the lease, owner-checked. See Lease.Unlock for the errors.
func (l *ManagedLease) Unlock(ctx context.Context) error {
	Observe(ctx, l.opt.Observer, l.event(PointBeforeUnlock))
	prior := l.usable()
	if errors.Is(prior, ErrReleased) {
		return prior
	}
	l.mu.Lock()
	l.unlocked = true
	l.finishLocked(fmt.Errorf("lock %q: %w", l.spec.Name, ErrReleased))
	l.mu.Unlock()
	l.wg.Wait()

	if err := ctx.Err(); err != nil {
		if prior != nil {
			return prior
		}
		return fmt.Errorf("lock %q: unlock: %w (left to expire by TTL)", l.spec.Name, err)
	}
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return prior // the max hold's release freed it
	}
	// The backend release is owner-checked, so it is sent even for a lease
	// known to be expired or lost: it cleans up if the key is still ours.
	err := l.ops.Release(ctx)
	if prior != nil {
		return prior
	}
	if err != nil {
		return fmt.Errorf("lock %q: unlock: %w", l.spec.Name, err)
	}
	return nil
}
