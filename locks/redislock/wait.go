package redislock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// line is how a waiter of any of the package's locks waits: it queues
// itself on the server as "<owner> <line id> <ttl> ..." and the release
// that frees room for it hands it its lease directly, publishing the
// fencing token on its line's channel, so that a release wakes the waiters
// it served and nobody else. A Locker, a Semaphore and each mode of an
// RWMutex have a line each; its waiting goroutines share one pub/sub
// subscription, and route hands each message to the owner it names.
//
// The recipe supplies the steps, each one round trip:
type line struct {
	name   string
	opt    locks.Options
	errorf func(string, ...any) error

	// try attempts without queueing, enqueue queues the owner when refused,
	// recheck looks again after a wake-up without a hand-over (taking its
	// turn, or making sure the owner is queued). Each reports the grant, or
	// statusWait with the time until the leases in the way may end.
	try, enqueue, recheck func(ctx context.Context, owner string) (attemptResult, error)
	// take turns a grant of fence, which the server began after start,
	// into a managed lease (locks.ErrLeaseExpired when it came too late).
	take func(ctx context.Context, owner string, fence locks.Token, start time.Time) (locks.Lease, error)
	// renew extends the lease handed to owner to a full TTL from now.
	renew func(ctx context.Context, owner string) error
	// withdraw takes owner out of the queue and gives back a lease handed
	// to it meanwhile, passing it on.
	withdraw func(ctx context.Context, owner string) error

	mu      sync.Mutex
	waiters map[string]chan locks.Token // owner -> fence of a hand-over
	listen  *listener                   // the line's channel, open while any goroutine waits
}

// lock waits until the lease is held, ctx ends (an error wrapping
// ctx.Err()) or the wait budget runs out (locks.ErrWaitBudget). While
// another goroutine of the line waits, the first attempt is skipped: it
// would find the lease taken and cost a round trip more.
func (q *line) lock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, q.errorf("lock: %w", err)
	}
	owner := locks.NewOwner()
	began := q.opt.Clock.Now()
	if !q.listen.active() {
		r, err := q.try(ctx, owner)
		if err != nil {
			return nil, err
		}
		if r.status != statusWait {
			return q.take(ctx, owner, r.fence, r.start)
		}
	}
	ch, err := q.join(ctx, owner)
	if err != nil {
		return nil, err
	}
	lease, owner, err := q.wait(ctx, owner, ch, began)
	if err != nil || lease == nil {
		q.abandon(owner)
		return nil, err
	}
	q.leave(owner)
	return lease, nil
}

// wait queues owner and waits for a hand-over, a re-check or the end. It
// returns the owner it waited as last, which the caller leaves the queue
// and the waiters as.
func (q *line) wait(ctx context.Context, owner string, ch chan locks.Token, began time.Time) (locks.Lease, string, error) {
	r, err := q.enqueue(ctx, owner)
	for {
		if err != nil {
			return nil, owner, err
		}
		if r.status != statusWait {
			lease, terr := q.take(ctx, owner, r.fence, r.start)
			if !errors.Is(terr, locks.ErrLeaseExpired) {
				return lease, owner, terr
			}
			// Granted, but too late to use: it was released (and handed
			// on). When a re-check found a hand-over, its message is in ch
			// or on its way; read later, it would pass for a new hand-over
			// and grant a lease another waiter holds, with a lower token.
			// So the waiter queues again as a new owner, on a new channel:
			// the old owner's messages find nobody.
			owner, ch = q.rename(owner)
			r, err = q.enqueue(ctx, owner)
			continue
		}
		// r.start is the last moment the lease was known not to be ours:
		// a hand-over after it began later, so r.start + TTL is a safe
		// bound for a lease handed over from now on.
		since := r.start
		fence, woke, serr := sleepOn(ctx, q.opt, q.errorf, ch, r.pttl, began)
		switch {
		case serr != nil:
			return nil, owner, serr
		case woke && fence > 0:
			if lease, herr := q.handover(ctx, owner, fence, since); lease != nil || herr != nil {
				return lease, owner, herr
			}
		}
		r, err = q.recheck(ctx, owner)
	}
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
// the lease was not its own, so the server began it after since. A waiter
// that waited long enough for that bound to be near claims the lease with a
// renewal first; a nil lease and nil error mean the lease is no longer ours
// and the waiter goes on waiting.
func (q *line) handover(ctx context.Context, owner string, fence locks.Token, since time.Time) (locks.Lease, error) {
	if q.opt.Clock.Now().Sub(since) > q.opt.TTL/2 {
		start := q.opt.Clock.Now()
		if err := q.renew(ctx, owner); err != nil {
			return nil, nil
		}
		since = start
	}
	lease, err := q.take(ctx, owner, fence, since)
	if errors.Is(err, locks.ErrLeaseExpired) {
		return nil, nil // released again; keep waiting
	}
	return lease, err
}

// abandon leaves the queue after a failed or cancelled wait. A hand-over
// that raced with the cancellation is released at once (and passed on), so
// a waiter that gave up never keeps the lease until its TTL.
func (q *line) abandon(owner string) {
	q.leave(owner)
	ctx, cancel := locks.RequestContext(context.Background(), q.opt.RequestTimeout)
	defer cancel()
	if err := q.withdraw(ctx, owner); err != nil {
		q.opt.Logger.Warn("lockproof: could not leave the queue; a hand-over to this waiter will expire by TTL",
			"lock", q.name, "err", err)
	}
}
