package mysqllock

import (
	"context"
	"errors"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// Backoff of a waiting Lock. MySQL cannot notify a waiter, so it polls, but
// never on a fixed period: the pause starts at minBackoff, doubles up to
// maxBackoff (or a tenth of the TTL, if less), is drawn at random from its
// upper half, and never outlasts the holder's remaining time as the
// database reported it in the same read.
const (
	minBackoff = 2 * time.Millisecond
	maxBackoff = 250 * time.Millisecond
)

// Lock waits until the lock is held, ctx ends (an error wrapping ctx.Err())
// or the wait budget runs out (locks.ErrWaitBudget).
func (l *Locker) Lock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, false, l.lock)
}

// lock is Lock without re-entry (see locks.WithOwner).
func (l *Locker) lock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, l.errorf("lock: %w", err)
	}
	owner := newOwner()
	began := l.opt.Clock.Now()
	ceiling := min(maxBackoff, max(l.opt.TTL/10, minBackoff))
	step := minBackoff
	for {
		r, err := l.attempt(ctx, owner)
		if err != nil {
			return nil, err
		}
		if r.won {
			lease, err := l.grant(ctx, owner, r)
			if !errors.Is(err, locks.ErrLeaseExpired) {
				return lease, err
			}
			// Won too late to use (a pause longer than the TTL); it was
			// released. Wait again with a fresh owner.
			owner = newOwner()
			continue
		}
		pause := step/2 + l.opt.Jitter(step/2+1)
		if r.left >= 0 {
			pause = min(pause, r.left+time.Millisecond)
		}
		step = min(2*step, ceiling)
		if err := l.sleep(ctx, pause, began); err != nil {
			return nil, err
		}
	}
}

// sleep waits d, bounded by the wait budget and ctx.
func (l *Locker) sleep(ctx context.Context, d time.Duration, began time.Time) error {
	budgetLeft := time.Duration(-1)
	if l.opt.WaitBudget > 0 {
		budgetLeft = l.opt.WaitBudget - l.opt.Clock.Now().Sub(began)
		if budgetLeft <= 0 {
			return l.errorf("lock: %w after %v", locks.ErrWaitBudget, l.opt.WaitBudget)
		}
		d = min(d, budgetLeft)
	}
	t := l.opt.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		if budgetLeft >= 0 && d == budgetLeft {
			return l.errorf("lock: %w after %v", locks.ErrWaitBudget, l.opt.WaitBudget)
		}
		return nil
	case <-ctx.Done():
		return l.errorf("lock: %w", ctx.Err())
	}
}
