package consullock

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/locks"
)

// Lock waits until the lock is held, ctx ends (an error wrapping ctx.Err())
// or the wait budget runs out (locks.ErrWaitBudget).
//
// Lock calls of one Locker take turns (see Locker). The one whose turn it
// is tries the key once, then joins the lock's queue on the server and
// waits by blocking queries, never a poll: behind another waiter, on that
// waiter's queue entry; at the head of the queue, on the lock key, trying
// to acquire only when a read shows the key free. The first read of the
// key is immediate (index 0); each following one waits for the key's index
// to move past the last seen. Every blocking query waits for at most the
// budget left (recomputed after every wake-up), half the session TTL (the
// waiting session is renewed then) and five minutes. An index that goes
// backwards restarts from 0. A failed acquire on a key that reads free
// means a lock-delay after an invalidated session: the waiter then blocks
// on the key until the lock-delay should be over (see the package
// documentation), woken early only if the key changes, and tries again.
func (l *Locker) Lock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, false, l.lock)
}

// lock is Lock without re-entry (see locks.WithOwner).
func (l *Locker) lock(ctx context.Context) (locks.Lease, error) {
	w := waiter{l: l, began: l.opt.Clock.Now()}
	a, leave, err := l.begin(ctx, w.began)
	if err != nil {
		return nil, err
	}
	defer leave()
	a.wait = &w
	restarted := false
	for {
		var lease locks.Lease
		if !restarted {
			lease, err = a.try(ctx)
		}
		restarted = false
		if err == nil && lease == nil {
			err = w.await(ctx, a)
		}
		switch {
		case err == nil && lease != nil:
			return lease, nil
		case err == nil:
			continue
		case a.turnstile && (errors.Is(err, errSessionGone) || errors.Is(err, errLost) || errors.Is(err, locks.ErrLeaseExpired)):
			// A read-write mutex's attempt that held the writer's key and
			// lost it before its grant turned TryLocks away meanwhile,
			// which only a grant of this very attempt, then, accounts for:
			// a grant of a new attempt, later and with a later token,
			// would leave them refused by nobody. So the call ends here,
			// not granted; the caller may try again.
			a.abandon()
			return nil, l.errorf("lock: lost the writer's key before the grant: %w", err)
		case errors.Is(err, errSessionGone), errors.Is(err, errLost), errors.Is(err, locks.ErrLeaseExpired):
			// Start over with a new session, the old one gone or useless,
			// at the back of the queue (no attempt before queueing: the
			// waiters that queued meanwhile come first), reading the key
			// afresh once at the head.
			a.abandon()
			w.restart()
			if a, err = l.newAttempt(ctx); err != nil {
				return nil, err
			}
			a.wait, restarted = &w, true
		default:
			a.abandon()
			return nil, err
		}
	}
}

// begin starts a Lock call that began at began: its turn among the Lock
// calls of this Locker (leave ends it), and its first attempt.
func (l *Locker) begin(ctx context.Context, began time.Time) (a *attempt, leave func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, l.errorf("lock: %w", err)
	}
	if leave, err = l.enter(ctx, began); err != nil {
		return nil, nil, err
	}
	if a, err = l.newAttempt(ctx); err != nil {
		leave()
		return nil, nil, err
	}
	return a, leave, nil
}

// waiter is the state of one Lock call's wait.
type waiter struct {
	l         *Locker
	began     time.Time
	index     uint64    // for the next blocking query; 0: read at once
	free      bool      // the last read showed the key free
	freeSince time.Time // when reads started showing it free
	retries   int       // failed attempts on a key that read free
	head      bool      // no live waiter queues ahead of this one
	// lookFree, if not nil, replaces the read of the lock key that
	// awaitTurn makes when its wait for the predecessor times out: it
	// reports whether what the waiter waits for reads free (the
	// semaphore's permits).
	lookFree func(ctx context.Context, deadline time.Time) (bool, error)
}

// await blocks until the lock is worth another attempt, after an attempt
// failed: the key seen free, or a lock-delay believed over.
//
// A refused acquire on a key that read free at index i, which still reads
// free at i, can only be a lock-delay: any acquire by someone else would
// have moved the index (a refused acquire writes nothing). So the waiter
// blocks at i until the lock-delay should be over; a key that moves in the
// meantime (taken, or taken and already released by a faster waiter) ends
// that wait at once.
func (w *waiter) await(ctx context.Context, a *attempt) error {
	l := w.l
	if !w.head {
		tryNow, err := w.awaitTurn(ctx, a)
		if err != nil || tryNow {
			return err
		}
	}
	var delayEnd time.Time
	if w.free {
		delayEnd = w.delayEnd()
	}
	for {
		if err := a.keepAlive(ctx); err != nil {
			return err
		}
		now := l.opt.Clock.Now()
		if !delayEnd.IsZero() && !now.Before(delayEnd) {
			return nil
		}
		wait, deadline, err := w.bound(now, a, delayEnd)
		if err != nil {
			return err
		}
		pair, meta, err := w.readAt(ctx, l.key, w.index, wait, deadline)
		if err != nil {
			return err
		}
		free := pair == nil || pair.Session == ""
		prev := w.index
		w.index = nextIndex(prev, meta.LastIndex)
		moved := meta.LastIndex != prev
		if free && (!w.free || moved) {
			w.freeSince = l.opt.Clock.Now()
		}
		w.free = free
		switch {
		case !free:
			delayEnd, w.retries = time.Time{}, 0
		case delayEnd.IsZero(), moved:
			return nil
		}
		// Free and unchanged: the lock-delay wait timed out; the loop's
		// top decides whether it is over.
	}
}

// restart forgets what the waiter knew of the queue and of the key, for a
// new attempt: it queues again, and reads the key at once when at the head.
func (w *waiter) restart() {
	w.head, w.index, w.free = false, 0, false
}

// delayEnd is when to try again after an attempt failed on a key that read
// free. The lock-delay of the invalidated session started before the key
// read free, so it is over by freeSince + the Locker's lock-delay, when the
// holder used the same lock-delay. Should the attempt then fail again (a
// holder with a longer lock-delay, clocks that disagree) the next tries
// back off: 1/8 of the lock-delay (at least 1ms), doubling, capped at the
// TTL. Never a busy loop.
func (w *waiter) delayEnd() time.Time {
	l := w.l
	end := w.freeSince.Add(l.lockDelay)
	if now := l.opt.Clock.Now(); !now.Before(end) {
		step := max(l.lockDelay/8, time.Millisecond) << min(w.retries, 16)
		end = now.Add(min(step, l.opt.TTL))
	}
	w.retries++
	return end
}

// bound computes the next blocking query's wait, and the wait budget's
// deadline (zero when there is no budget). It returns ErrWaitBudget once
// the budget is spent.
func (w *waiter) bound(now time.Time, a *attempt, delayEnd time.Time) (time.Duration, time.Time, error) {
	l := w.l
	wait := min(maxBlock, max(a.renewDue().Sub(now), time.Millisecond))
	if !delayEnd.IsZero() {
		wait = min(wait, delayEnd.Sub(now))
	}
	var deadline time.Time
	if l.opt.WaitBudget > 0 {
		deadline = w.began.Add(l.opt.WaitBudget)
		left := deadline.Sub(now)
		if left <= 0 {
			return 0, deadline, l.errorf("lock: %w after %v", locks.ErrWaitBudget, l.opt.WaitBudget)
		}
		wait = min(wait, left)
	}
	return wait, deadline, nil
}

// readAt is one read of key, blocking unless index is 0 (see query).
func (w *waiter) readAt(ctx context.Context, key string, index uint64, wait time.Duration, deadline time.Time) (*api.KVPair, *api.QueryMeta, error) {
	var pair *api.KVPair
	meta, err := w.query(ctx, index, wait, deadline, func(q *api.QueryOptions) (m *api.QueryMeta, err error) {
		pair, m, err = w.l.client.KV().Get(key, q)
		return m, err
	})
	return pair, meta, err
}

// query sends one read, blocking unless index is 0. A deadline cancels it
// on the Locker's clock, whatever the server's wait: Consul adds up to
// wait/16 of jitter. A read at index 0 is bounded by the request timeout.
func (w *waiter) query(ctx context.Context, index uint64, wait time.Duration, deadline time.Time, read func(*api.QueryOptions) (*api.QueryMeta, error)) (*api.QueryMeta, error) {
	l := w.l
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !deadline.IsZero() {
		t := l.opt.Clock.AfterFunc(deadline.Sub(l.opt.Clock.Now()), cancel)
		defer t.Stop()
	}
	if index == 0 {
		rctx, rcancel := l.request(qctx)
		defer rcancel()
		qctx = rctx
	}
	meta, err := read((&api.QueryOptions{WaitIndex: index, WaitTime: wait}).WithContext(qctx))
	switch {
	case err == nil:
		return meta, nil
	case ctx.Err() != nil:
		return nil, l.errorf("lock: %w", ctx.Err())
	case !deadline.IsZero() && !l.opt.Clock.Now().Before(deadline):
		return nil, l.errorf("lock: %w after %v", locks.ErrWaitBudget, l.opt.WaitBudget)
	}
	return nil, l.errorf("lock: read: %w", err)
}

// enter waits for this Lock call's turn to contend on the server, behind
// the earlier Lock calls of the same Locker, within ctx and the wait
// budget. The returned function ends the turn.
func (l *Locker) enter(ctx context.Context, began time.Time) (func(), error) {
	leave := func() { <-l.gate }
	select {
	case l.gate <- struct{}{}:
		return leave, nil
	default:
	}
	var budget <-chan time.Time
	if l.opt.WaitBudget > 0 {
		t := l.opt.Clock.NewTimer(began.Add(l.opt.WaitBudget).Sub(l.opt.Clock.Now()))
		defer t.Stop()
		budget = t.C()
	}
	select {
	case l.gate <- struct{}{}:
		return leave, nil
	case <-ctx.Done():
		return nil, l.errorf("lock: %w", ctx.Err())
	case <-budget:
		return nil, l.errorf("lock: %w after %v", locks.ErrWaitBudget, l.opt.WaitBudget)
	}
}
