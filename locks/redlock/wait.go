package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// maxJitter bounds the random delay added to a waiter's timer, so that
// waiters woken by the same expiry do not retry in lock-step.
const maxJitter = 5 * time.Millisecond

// Lock waits until the lock is held, ctx ends (an error wrapping ctx.Err()),
// the wait budget runs out (locks.ErrWaitBudget), or too few nodes answer
// (locks.ErrNoQuorum, returned at once: waiting cannot fix an outage, and the
// caller knows better whether to retry).
//
// Waiting is notified, not polled. Lock subscribes to the release channel on
// every node that accepts before the attempt that precedes any wait, so no
// release can slip in between, and every release publishes the released
// owner there. After a failed attempt Lock waits for the release of the
// owner holding a majority, or for the earliest expiry among the keys the
// nodes reported plus jitter, whichever comes first (after a split vote
// among fresh contenders it backs off briefly instead: see the package
// documentation). Timers run on the Locker's clock.
//
// The first attempt is made before subscribing when no other goroutine of
// the Locker is waiting, so an uncontended Lock costs what TryLock costs.
// Goroutines of one Locker wait in line: one at a time competes on the nodes.
func (l *Locker) Lock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, false, l.lock)
}

// lock is Lock without re-entry (see locks.WithOwner).
func (l *Locker) lock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, l.errorf("lock: %w", err)
	}
	began := l.opt.Clock.Now()
	if !l.subscribed() {
		lease, _, err := l.acquireAs(ctx, locks.NewOwner())
		if !errors.Is(err, locks.ErrLocked) {
			return lease, err
		}
	}
	s, err := l.join(ctx)
	if err != nil {
		return nil, err
	}
	defer l.leave(s)
	budget, stop, err := l.budget(began)
	if err != nil {
		return nil, err
	}
	defer stop()
	if err := l.enter(ctx, budget); err != nil {
		return nil, err
	}
	defer func() { <-l.gate }()
	return l.wait(ctx, s, budget)
}

// wait alternates attempts and waits until an attempt ends other than with
// locks.ErrLocked.
func (l *Locker) wait(ctx context.Context, s *subscription, budget <-chan time.Time) (locks.Lease, error) {
	var prev hint
	for {
		owner := locks.NewOwner()
		s.reset(owner)
		lease, h, err := l.acquireAs(ctx, owner)
		if !errors.Is(err, locks.ErrLocked) {
			s.won(owner) // or failed otherwise: either way, no release of it is ours to ignore
			return lease, err
		}
		w := plan(h, prev, l.opt.Jitter)
		prev = h
		if w.listen {
			s.expect(h.holder)
		}
		if err := l.sleep(ctx, s, w, budget); err != nil {
			return nil, err
		}
	}
}

// pause is how a waiter waits after a failed attempt.
type pause struct {
	listen bool          // wake on a release (of the majority holder, if any)
	delay  time.Duration // retry after delay at the latest
}

// plan decides how to wait after the failed attempt h, prev being the one
// before it:
//   - an owner holds a majority: wait for its release, or for the first
//     expiry the nodes reported, plus jitter;
//   - a split vote among owners not seen before: they are contenders racing
//     right now, and each is about to release its share, which would wake
//     them all in lock-step; instead retry after a random part of twice the
//     attempt's duration, so that one of them goes first;
//   - a split that persists: wait for any release or the first expiry.
func plan(h, prev hint, jitter func(time.Duration) time.Duration) pause {
	if h.holder == "" && newOwners(h.held, prev.held) {
		return pause{delay: jitter(2*max(h.took, 0) + 1)}
	}
	return pause{listen: true, delay: h.expiry + jitter(maxJitter)}
}

// newOwners reports whether now has an owner that before has not.
func newOwners(now, before map[string]int) bool {
	for o := range now {
		if _, ok := before[o]; !ok {
			return true
		}
	}
	return false
}

// sleep waits as p says, or for the wait budget, or for ctx.
func (l *Locker) sleep(ctx context.Context, s *subscription, p pause, budget <-chan time.Time) error {
	t := l.opt.Clock.NewTimer(p.delay)
	defer t.Stop()
	var wake <-chan struct{}
	if p.listen {
		wake = s.wake
	}
	select {
	case <-wake:
		return nil
	case <-t.C():
		return nil
	case <-budget:
		return l.errorf("lock: %w after %v", locks.ErrWaitBudget, l.opt.WaitBudget)
	case <-ctx.Done():
		return l.errorf("lock: %w", ctx.Err())
	}
}

// budget returns a channel that receives when the wait budget, counted from
// began on the Locker's clock, runs out; nil without a budget.
func (l *Locker) budget(began time.Time) (<-chan time.Time, func(), error) {
	if l.opt.WaitBudget <= 0 {
		return nil, func() {}, nil
	}
	left := began.Add(l.opt.WaitBudget).Sub(l.opt.Clock.Now())
	if left <= 0 {
		return nil, nil, l.errorf("lock: %w after %v", locks.ErrWaitBudget, l.opt.WaitBudget)
	}
	t := l.opt.Clock.NewTimer(left)
	return t.C(), func() { t.Stop() }, nil
}

// enter takes the Locker's gate: the turn to compete on the nodes.
func (l *Locker) enter(ctx context.Context, budget <-chan time.Time) error {
	select {
	case l.gate <- struct{}{}:
		return nil
	case <-budget:
		return l.errorf("lock: %w after %v", locks.ErrWaitBudget, l.opt.WaitBudget)
	case <-ctx.Done():
		return l.errorf("lock: %w", ctx.Err())
	}
}
