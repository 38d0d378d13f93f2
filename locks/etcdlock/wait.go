package etcdlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lockproof/lockproof/locks"
)

// errRetry says an attempt ended without an error for the caller: its
// session expired before the first request, or it won too late to use the
// lock. Lock starts over with another session.
var errRetry = errors.New("etcdlock: retry")

// Lock waits until the lock is held, ctx ends (an error wrapping ctx.Err()),
// the wait budget runs out (locks.ErrWaitBudget) or the waiter's own lease
// is lost while it waits (ErrSessionLost and locks.ErrNotHeld).
//
// Queue mode: the contender puts its key, bound to its lease, in the same
// transaction that reads the newest key created before it: its predecessor.
// With none, it holds the lock. Otherwise it watches the predecessor's key
// alone for its deletion, renewing its own lease meanwhile, and after every
// wake-up re-checks in one transaction that its own key still exists with its
// create revision (and so its lease) and finds its predecessor again (the
// one that went may have been a waiter that gave up or crashed). It never
// polls.
//
// Requests that fail with a transient error (gRPC Unavailable: a member
// went away, no leader for a moment) are retried after a short, growing,
// jittered pause until ctx or the wait budget ends; an enqueue whose answer
// was lost is recognised by its key and adopted.
func (l *Locker) Lock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, false, l.lock)
}

// lock is Lock without re-entry (see locks.WithOwner).
func (l *Locker) lock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, l.errorf("lock: %w", err)
	}
	began := l.opt.Clock.Now()
	for tries := 0; ; {
		s, err := l.take(ctx)
		if err != nil {
			if ctx.Err() != nil || !transient(err) {
				return nil, err
			}
			if perr := l.pauseAfter(ctx, err, &tries, began); perr != nil {
				return nil, l.errorf("lock: %w", perr)
			}
			continue
		}
		var lease locks.Lease
		if l.naive {
			lease, err = l.lockNaive(ctx, s, began)
		} else {
			lease, err = l.lockQueue(ctx, s, began)
		}
		if !errors.Is(err, errRetry) {
			return lease, err
		}
	}
}

// lockQueue queues the contender with session s and waits for its turn.
// Requests that fail on a transient error (a member went away, no leader
// for a moment) are sent again after a pause, until ctx or the wait budget
// ends: the enqueue adopts the contender's key if an earlier try had put it.
func (l *Locker) lockQueue(ctx context.Context, s *session, began time.Time) (locks.Lease, error) {
	key := l.contenderKey(s)
	rev, pred, known, err := l.enqueue(ctx, s, key, began)
	if err != nil {
		return nil, err
	}
	for tries := 0; !known || len(pred) >= l.permits; {
		if known { // wait for one of the permits keys just ahead to go
			if err := l.waitDelete(ctx, s, key, rev, pred, 0, began); err != nil {
				if !errors.Is(err, ErrSessionLost) {
					l.abandon(s, key, rev)
				}
				return nil, err
			}
		}
		var resp *clientv3.TxnResponse
		err := l.bounded(ctx, func(ctx context.Context) (err error) {
			resp, err = l.client.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
				Then(l.aheadOp(rev - 1)).
				Commit()
			return err
		})
		if err != nil {
			if perr := l.pauseAfter(ctx, err, &tries, began); perr != nil {
				l.abandon(s, key, rev)
				return nil, l.errorf("lock: re-check: %w", perr)
			}
			known = false // re-check again
			continue
		}
		tries = 0
		if !resp.Succeeded {
			return nil, l.errorf("lock: %w while waiting (key %s is gone): %w", ErrSessionLost, key, locks.ErrNotHeld)
		}
		pred, known = resp.Responses[0].GetResponseRange().Kvs, true
	}
	return l.grantWaited(ctx, s, key, rev)
}

// enqueue puts the contender's key and reads its predecessor, the newest
// key created before it, in one transaction, and returns the key's create
// revision and the predecessor (none: the contender holds the lock). If the
// key exists already, a try whose answer was lost had put it (no one else
// puts this session's key): enqueue adopts it, and known is false: the
// caller finds the predecessor.
func (l *Locker) enqueue(ctx context.Context, s *session, key string, began time.Time) (rev int64, pred []*mvccpb.KeyValue, known bool, err error) {
	for tries := 0; ; {
		var resp *clientv3.TxnResponse
		err := l.bounded(ctx, func(ctx context.Context) (err error) {
			resp, err = l.client.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(l.aheadOp(0), clientv3.OpPut(key, "", clientv3.WithLease(s.id))).
				Else(clientv3.OpGet(key)).
				Commit()
			return err
		})
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound) && tries == 0:
			return 0, nil, false, errRetry // the idle session expired just now
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return 0, nil, false, l.errorf("lock: %w: %w", ErrSessionLost, locks.ErrNotHeld)
		case err != nil:
			if perr := l.pauseAfter(ctx, err, &tries, began); perr != nil {
				// The put may have been applied: its key goes with the
				// lease, revoked in the background, bounded by the request
				// timeout: the caller's ctx or budget has ended.
				go l.discard(s)
				return 0, nil, false, l.errorf("lock: %w", perr)
			}
			continue
		case resp.Succeeded:
			return resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs, true, nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 || clientv3.LeaseID(kvs[0].Lease) != s.id {
			return 0, nil, false, l.errorf("lock: key %s exists already, outside this Locker", key)
		}
		return kvs[0].CreateRevision, nil, false, nil
	}
}

// pauseAfter decides what a failed request means for a waiter: a transient
// error (the member went away, no leader for a moment) is retried after a
// pause that grows with *tries; anything else, or the end of ctx or of the
// wait budget, is returned.
func (l *Locker) pauseAfter(ctx context.Context, err error, tries *int, began time.Time) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if !transient(err) {
		return err
	}
	*tries++
	budget, stop := l.budgetTimer(began)
	defer stop()
	t := l.opt.Clock.NewTimer(l.opt.Backoff(*tries))
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-budget:
		return fmt.Errorf("%w after %v (last error: %w)", locks.ErrWaitBudget, l.opt.WaitBudget, err)
	case <-ctx.Done():
		return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
	}
}

// transient reports whether err is one that the same request may not meet
// again: gRPC's Unavailable, which etcd uses for a lost connection, no
// leader, a leader change and a request timeout, and a request that got
// no answer within the request timeout (bounded).
func transient(err error) bool {
	if errors.Is(err, errRequestTimeout) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	return status.Code(err) == codes.Unavailable
}

// grantWaited turns a won wait into a lease; a win too late to use was
// released by grant, and the caller starts over.
func (l *Locker) grantWaited(ctx context.Context, s *session, key string, rev int64) (locks.Lease, error) {
	lease, err := l.grant(ctx, s, key, rev)
	if errors.Is(err, locks.ErrLeaseExpired) && ctx.Err() == nil {
		return nil, errRetry
	}
	return lease, err
}

// lockNaive is the herd: try to create the one lock key; if it exists, watch
// it for its deletion and try again, as every other waiter does.
func (l *Locker) lockNaive(ctx context.Context, s *session, began time.Time) (locks.Lease, error) {
	for first, tries := true, 0; ; first = false {
		resp, err := l.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", 0)).
			Then(clientv3.OpPut(l.key, "", clientv3.WithLease(s.id))).
			Else(clientv3.OpGet(l.key)).
			Commit()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound) && first:
			return nil, errRetry // the idle session expired just now
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return nil, l.errorf("lock: %w while waiting: %w", ErrSessionLost, locks.ErrNotHeld)
		case err != nil:
			if perr := l.pauseAfter(ctx, err, &tries, began); perr != nil {
				l.discard(s) // the put may have been applied: the key goes with the lease
				return nil, l.errorf("lock: %w", perr)
			}
			continue
		case resp.Succeeded:
			return l.grantWaited(ctx, s, l.key, resp.Header.Revision)
		}
		tries = 0
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 && clientv3.LeaseID(kvs[0].Lease) == s.id {
			// Ours, from a try whose answer was lost.
			return l.grantWaited(ctx, s, l.key, kvs[0].CreateRevision)
		}
		if err := l.waitDelete(ctx, s, "", 0, []*mvccpb.KeyValue{{Key: []byte(l.key)}}, resp.Header.Revision+1, began); err != nil {
			if !errors.Is(err, ErrSessionLost) {
				l.putIdle(s) // a naive waiter has no key to delete
			}
			return nil, err
		}
	}
}

// waitDelete returns once one of the keys kvs is deleted, or its watch
// ends (the caller re-checks), renewing session s, whose key is own
// (created at ownRev; "" for none yet), meanwhile. It returns an
// error when ctx ends, the wait budget runs out, or the session is lost or
// cannot be renewed in time. One key is watched alone; several (the
// permits keys just ahead of a semaphore's waiter) by a watch of the lock's
// prefix, whose deletions of other keys are passed over.
//
// A semaphore's waiter waits for any of the keys just ahead, not for the
// one permits places ahead only: that one may outlive a key between it and
// the waiter, whose deletion frees a permit (a later holder releasing
// before an earlier one), and the waiter would then wait, a permit free,
// for as long as the earlier holder holds.
//
// With from > 0 it watches from revision from. With from == 0 it watches
// from the revision at which the watch is created and then checks that
// each of kvs still exists with its create revision, which proves it was
// not deleted before. The second way costs a read but avoids a stall: etcd delivers the
// events of a watch that starts at a past revision only once its background
// sync catches up, every 100 ms, and a waiter's start revision is usually
// past (other contenders wrote after it).
func (l *Locker) waitDelete(ctx context.Context, s *session, own string, ownRev int64, kvs []*mvccpb.KeyValue, from int64, began time.Time) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithFilterPut(), clientv3.WithCreatedNotify()}
	if from > 0 {
		opts = append(opts, clientv3.WithRev(from))
	}
	watched := string(kvs[0].Key)
	if len(kvs) > 1 {
		watched = l.key
		opts = append(opts, clientv3.WithPrefix())
	}
	wch := l.client.Watch(wctx, watched, opts...)
	budget, stopBudget := l.budgetTimer(began)
	defer stopBudget()
	retry := false // the last renewal failed: the next one comes sooner
	for {
		next := s.renewedAt().Add(l.opt.TTL / 3).Sub(l.opt.Clock.Now())
		if retry {
			next = l.opt.TTL / 10
		}
		renew := l.opt.Clock.NewTimer(next)
		select {
		case wr, ok := <-wch:
			renew.Stop()
			if !ok || wr.Canceled || wr.Err() != nil {
				if err := ctx.Err(); err != nil {
					return l.errorf("lock: %w", err)
				}
				return nil // compacted, no leader, reconnected: re-check
			}
			if wr.Created && from == 0 {
				for _, kv := range kvs {
					if gone, err := l.gone(ctx, kv); gone || err != nil {
						return err
					}
				}
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE && slices.ContainsFunc(kvs, func(kv *mvccpb.KeyValue) bool {
					return bytes.Equal(kv.Key, ev.Kv.Key)
				}) {
					return nil
				}
			}
		case <-renew.C():
			var err error
			if retry, err = l.renewWaiting(ctx, s, own, ownRev); err != nil {
				return err
			}
		case <-budget:
			renew.Stop()
			return l.errorf("lock: %w after %v", locks.ErrWaitBudget, l.opt.WaitBudget)
		case <-ctx.Done():
			renew.Stop()
			return l.errorf("lock: %w", ctx.Err())
		}
	}
}

// gone reports whether kv's key no longer exists with kv's create revision.
func (l *Locker) gone(ctx context.Context, kv *mvccpb.KeyValue) (bool, error) {
	resp, err := l.client.Get(ctx, string(kv.Key), clientv3.WithKeysOnly())
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return false, l.errorf("lock: %w", ctxErr)
		}
		return true, nil // re-check
	}
	return len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != kv.CreateRevision, nil
}

// renewWaiting renews a waiter's session, whose key is own, created at
// ownRev (none: "", see renewOwn). A failure other than the lease's loss
// is to be retried (retry is true) until the lease may have expired.
func (l *Locker) renewWaiting(ctx context.Context, s *session, own string, ownRev int64) (retry bool, err error) {
	err = l.renewOwn(ctx, s, own, ownRev)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, locks.ErrNotHeld):
		return false, l.errorf("lock: %w while waiting", err)
	case ctx.Err() != nil:
		return false, l.errorf("lock: %w", ctx.Err())
	case !l.valid(s):
		return false, l.errorf("lock: %w: cannot renew the waiter's lease in time: %w", locks.ErrLeaseExpired, err)
	}
	l.opt.Logger.Warn("lockproof: renewing a waiter's lease failed, retrying", "lock", l.name, "err", err)
	return true, nil
}

// budgetTimer returns a channel that fires when the wait budget runs out
// (never without one) and a function to stop it.
func (l *Locker) budgetTimer(began time.Time) (<-chan time.Time, func()) {
	if l.opt.WaitBudget <= 0 {
		return nil, func() {}
	}
	t := l.opt.Clock.NewTimer(l.opt.WaitBudget - l.opt.Clock.Now().Sub(began))
	return t.C(), func() { t.Stop() }
}
