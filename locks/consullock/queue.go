package consullock

import (
	"context"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/internal/layout"
)

// queueSegment is the path segment, under a lock's key, that holds the
// lock's queue of waiters: one key per waiting session,
// <key>/.queue/<session>, acquired by that session.
const queueSegment = layout.ConsulQueueSegment

// queuePrefix is the KV prefix of the lock's queue entries.
func (l *Locker) queuePrefix() string { return layout.ConsulQueue(l.key) }

// enqueue writes the attempt's queue entry, acquired by its session, so that
// the entry outlives the session by no more than an invalidation: Consul
// releases it then (the entry stays, showing no session, until someone
// deletes it). An entry that cannot be acquired is no error: the attempt
// then waits as the head of the queue, on the lock key, as it would with no
// queue at all.
func (a *attempt) enqueue(ctx context.Context) (bool, error) {
	l := a.l
	key := l.queuePrefix() + a.session
	rctx, cancel := l.request(ctx)
	defer cancel()
	ok, _, err := l.client.KV().Acquire(&api.KVPair{Key: key, Session: a.session}, writeOpts(rctx))
	switch {
	case invalidSession(err):
		return false, errSessionGone
	case err != nil:
		// The write may have gone through unseen: the entry is deleted
		// with the session's other keys (see releaseAndDestroy).
		a.entry = key
		return false, l.errorf("lock: enqueue: %w", l.cause(ctx, err))
	}
	a.entry = key
	return ok, nil
}

// predecessor lists the queue and returns the live entry (one that shows
// a session) created last before the attempt's own entry, nil when there
// is none: the attempt is then the head of the queue. Entries whose session
// is gone are deleted on the way (a compare-and-set on their index, so an
// entry written again in between is left alone). mine reports whether the
// attempt's own entry was found; a missing entry means its session was
// invalidated and someone deleted it.
func (a *attempt) predecessor(ctx context.Context) (pred *api.KVPair, mine bool, err error) {
	l := a.l
	rctx, cancel := l.request(ctx)
	defer cancel()
	pairs, _, err := l.client.KV().List(l.queuePrefix(), (&api.QueryOptions{}).WithContext(rctx))
	if err != nil {
		return nil, false, l.errorf("lock: list queue: %w", l.cause(ctx, err))
	}
	var own *api.KVPair
	for _, p := range pairs {
		if p.Key == a.entry {
			own = p
			break
		}
	}
	if own == nil || own.Session != a.session {
		return nil, false, nil
	}
	var dead []*api.KVPair
	for _, p := range pairs {
		switch {
		case p.Session == "":
			dead = append(dead, p)
		case p.CreateIndex < own.CreateIndex && (pred == nil || p.CreateIndex > pred.CreateIndex):
			pred = p
		}
	}
	for _, p := range dead {
		// Best effort: whoever sees a dead entry may delete it, and a
		// failure leaves it for the next reader.
		dctx, dcancel := l.request(ctx)
		_, _, _ = l.client.KV().DeleteCAS(p, writeOpts(dctx))
		dcancel()
	}
	return pred, true, nil
}

// looksFree reads, at once, whether the lock key (or what lookFree looks
// at) is free.
func (w *waiter) looksFree(ctx context.Context, deadline time.Time) (bool, error) {
	if w.lookFree != nil {
		return w.lookFree(ctx, deadline)
	}
	lock, _, err := w.readAt(ctx, w.l.key, 0, 0, deadline)
	if err != nil {
		return false, err
	}
	return lock == nil || lock.Session == "", nil
}

// awaitTurn waits while others queue ahead of the attempt. It returns
// once the attempt is the head of the queue (w.head is then set; tryNow
// says whether it waited for that, in which case the lock was most likely
// just handed on and is worth an attempt at once), or when its wait for the
// predecessor ended with the lock key read free (tryNow): a predecessor
// that does not take a free lock must not stall the queue, so the lock is
// looked at each time the wait times out, every TTL/2 at most.
//
// A waiter behind others blocks on its predecessor's entry only, so a
// release wakes the next waiter in line and nobody else.
func (w *waiter) awaitTurn(ctx context.Context, a *attempt) (tryNow bool, err error) {
	l := w.l
	waited, rewrites := false, 0
	for {
		if a.entry == "" {
			ok, err := a.enqueue(ctx)
			if err != nil {
				return false, err
			}
			if !ok {
				w.head = true
				return waited, nil
			}
		}
		if err := a.keepAlive(ctx); err != nil {
			return false, err
		}
		pred, mine, err := a.predecessor(ctx)
		if err != nil {
			return false, err
		}
		switch {
		case !mine && rewrites < 2:
			// Our entry is gone with our session, or was never written:
			// write it again (an invalid session says which).
			a.entry = ""
			rewrites++
			continue
		case !mine:
			// Written, yet deleted again: someone else's doing. Wait on the
			// lock key instead of fighting over the entry.
			w.head = true
			return waited, nil
		case pred == nil:
			w.head = true
			return waited, nil
		}
		waited = true
		wait, deadline, err := w.bound(l.opt.Clock.Now(), a, time.Time{})
		if err != nil {
			return false, err
		}
		for {
			pair, _, err := w.readAt(ctx, pred.Key, pred.ModifyIndex, wait, deadline)
			if err != nil {
				return false, err
			}
			if pair == nil || pair.Session == "" || pair.ModifyIndex != pred.ModifyIndex {
				break // gone: list the queue again
			}
			// Timed out with the predecessor still there: renew, and look
			// at the lock itself.
			if err := a.keepAlive(ctx); err != nil {
				return false, err
			}
			free, err := w.looksFree(ctx, deadline)
			if err != nil {
				return false, err
			}
			if free {
				return true, nil
			}
			if wait, deadline, err = w.bound(l.opt.Clock.Now(), a, time.Time{}); err != nil {
				return false, err
			}
		}
	}
}
