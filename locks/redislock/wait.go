package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// Lock waits until the lock is held, ctx ends (an error wrapping ctx.Err())
// or the wait budget runs out (locks.ErrWaitBudget).
//
// Waiting is notified, not polled: a waiter queues itself in Redis and the
// holder's unlock hands the lock straight to the first waiter still
// listening, publishing the new fencing token on that waiter's channel. A
// waiter also re-checks once the holder's remaining TTL (plus jitter) has
// passed, which covers holders that crash without unlocking.
func (l *Locker) Lock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, false, l.lock)
}

// lock is Lock without re-entry (see locks.WithOwner).
func (l *Locker) lock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, l.errorf("lock: %w", err)
	}
	owner := locks.NewOwner()
	began := l.opt.Clock.Now()
	if !l.subscribed() {
		r, err := l.try(ctx, owner)
		if err != nil || r.status != statusWait {
			return l.result(ctx, owner, r, err)
		}
	}
	ch, err := l.join(ctx, owner)
	if err != nil {
		return nil, err
	}
	lease, owner, err := l.wait(ctx, owner, ch, began)
	if err != nil || lease == nil {
		l.abandon(owner)
		return nil, err
	}
	l.leave(owner)
	return lease, nil
}

func (l *Locker) subscribed() bool { return l.listen.active() }

func (l *Locker) result(ctx context.Context, owner string, r attemptResult, err error) (locks.Lease, error) {
	if err != nil {
		return nil, err
	}
	return l.grant(ctx, owner, r.fence, r.start)
}

// wait queues owner and waits for a hand-over, a re-check or the end. It
// returns the owner it waited as last, which the caller leaves the queue
// and the waiters as.
func (l *Locker) wait(ctx context.Context, owner string, ch chan locks.Token, began time.Time) (locks.Lease, string, error) {
	r, err := l.enqueue(ctx, owner)
	for {
		if err != nil {
			return nil, owner, err
		}
		if r.status != statusWait {
			lease, rerr := l.result(ctx, owner, r, nil)
			if !errors.Is(rerr, locks.ErrLeaseExpired) {
				return lease, owner, rerr
			}
			// Granted, but too late to use: it was released (and handed
			// on). When a re-check found a hand-over, its message is in ch
			// or on its way; read later, it would pass for a new hand-over
			// and grant a lock the next waiter holds, with a lower token.
			// So the waiter queues again as a new owner, on a new channel:
			// the old owner's messages find nobody.
			owner, ch = l.rename(owner)
			r, err = l.enqueue(ctx, owner)
			continue
		}
		// r.start is the last moment the lock was known not to be ours:
		// a hand-over after it set the key's TTL later, so r.start + TTL
		// is a safe bound for a lease handed over from now on.
		since := r.start
		fence, woke, serr := l.sleep(ctx, ch, r.pttl, began)
		switch {
		case serr != nil:
			return nil, owner, serr
		case woke && fence > 0:
			if lease, herr := l.handover(ctx, owner, fence, since); lease != nil || herr != nil {
				return lease, owner, herr
			}
		}
		r, err = l.recheck(ctx, owner)
	}
}

// sleep waits for a message on ch (woke), the holder's remaining TTL plus
// jitter, the wait budget or ctx.
func (l *Locker) sleep(ctx context.Context, ch chan locks.Token, pttl time.Duration, began time.Time) (locks.Token, bool, error) {
	return sleepOn(ctx, l.opt, l.errorf, ch, pttl, began)
}

// sleepOn waits for a message on ch (woke), pttl plus jitter (the TTL when
// pttl < 0), what is left of o's wait budget counted from began, or ctx.
// errorf formats the caller's errors.
func sleepOn[T any](ctx context.Context, o locks.Options, errorf func(string, ...any) error,
	ch <-chan T, pttl time.Duration, began time.Time) (T, bool, error) {
	var zero T
	d := o.TTL
	if pttl >= 0 {
		d = pttl + jitter(o, pttl)
	}
	budgetLeft := time.Duration(-1)
	if o.WaitBudget > 0 {
		budgetLeft = o.WaitBudget - o.Clock.Now().Sub(began)
		if budgetLeft <= 0 {
			return zero, false, errorf("lock: %w after %v", locks.ErrWaitBudget, o.WaitBudget)
		}
		d = min(d, budgetLeft)
	}
	t := o.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case v := <-ch:
		return v, true, nil
	case <-t.C():
		if budgetLeft >= 0 && d == budgetLeft {
			return zero, false, errorf("lock: %w after %v", locks.ErrWaitBudget, o.WaitBudget)
		}
		return zero, false, nil
	case <-ctx.Done():
		return zero, false, errorf("lock: %w", ctx.Err())
	}
}

// jitter spreads waiters' re-checks: up to a tenth of the wait, at most 10 ms.
func jitter(o locks.Options, d time.Duration) time.Duration {
	j := min(d/10, 10*time.Millisecond)
	if j <= 0 {
		return time.Millisecond
	}
	return o.Jitter(j) + time.Millisecond
}

// handover turns a hand-over into a lease. since is when the waiter last saw
// the lock was not its own, so the key's TTL started after it. A waiter that
// waited long enough for that bound to be near claims the lock with a renewal
// first; a nil lease and nil error mean the lock is no longer ours and the
// waiter goes on waiting.
func (l *Locker) handover(ctx context.Context, owner string, fence locks.Token, since time.Time) (locks.Lease, error) {
	if l.opt.Clock.Now().Sub(since) > l.opt.TTL/2 {
		start := l.opt.Clock.Now()
		if err := (leaseOps{l: l, owner: owner}).Renew(ctx); err != nil {
			return nil, nil
		}
		since = start
	}
	lease, err := l.grant(ctx, owner, fence, since)
	if errors.Is(err, locks.ErrLeaseExpired) {
		return nil, nil // released again; keep waiting
	}
	return lease, err
}

// abandon leaves the queue after a failed or cancelled wait. A hand-over
// that raced with the cancellation is released at once (and passed on), so
// a waiter that gave up never keeps the lock until its TTL.
func (l *Locker) abandon(owner string) {
	l.leave(owner)
	ctx, cancel := locks.RequestContext(context.Background(), l.opt.RequestTimeout)
	defer cancel()
	if _, err := l.release(ctx, owner, l.member(owner)); err != nil {
		l.opt.Logger.Warn("lockproof: could not leave the queue; a hand-over to this waiter will expire by TTL",
			"lock", l.name, "err", err)
	}
}
