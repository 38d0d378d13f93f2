package redlock

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
)

// leaseOps are the owner-checked operations on one acquisition, sent to
// every node; locks.ManagedLease does the rest.
type leaseOps struct {
	l     *Locker
	owner string
}

var _ locks.LeaseOps = (*leaseOps)(nil)

// Renew resets the TTL on every node that still records the owner. It
// succeeds when a majority did so within TTL - drift of the request. It
// returns locks.ErrNotHeld once the nodes answering "not ours" leave no
// majority possible, and locks.ErrNoQuorum when too few nodes answered in
// time (the watchdog retries those).
func (o *leaseOps) Renew(ctx context.Context) error {
	l := o.l
	start := l.opt.Clock.Now()
	ttl := l.opt.TTL.Milliseconds()
	v := countVotes(fanOut(ctx, l.nodes, l.opt.RequestTimeout,
		func(ctx context.Context, c redis.UniversalClient) (bool, error) {
			n, err := renewScript.Run(ctx, c, []string{l.key}, o.owner, ttl).Int64()
			return n == 1, err
		}))
	elapsed := l.opt.Clock.Now().Sub(start)
	switch {
	case v.no > len(l.nodes)-l.quorum:
		return withNodeErrs(l.errorf("renew: %w on %d of %d nodes", locks.ErrNotHeld, v.no, len(l.nodes)), v.errs)
	case v.yes < l.quorum:
		return withNodeErrs(l.errorf("renew: %w: renewed on %d of %d nodes, %d needed",
			locks.ErrNoQuorum, v.yes, len(l.nodes), l.quorum), v.errs)
	case elapsed >= l.opt.TTL-locks.Drift(l.opt.TTL):
		return withNodeErrs(l.errorf("renew: %w: a majority answered, but after %v", locks.ErrNoQuorum, elapsed), v.errs)
	}
	o.warn("renewed without every node", v.errs)
	return nil
}

// Release deletes the key on every node that still records the owner,
// publishing the release. Nodes that fail keep the key until its TTL. It
// returns locks.ErrNotHeld when the nodes answering "not ours" leave no
// majority possible, locks.ErrNoQuorum when fewer than a majority answered,
// and nil otherwise.
func (o *leaseOps) Release(ctx context.Context) error {
	l := o.l
	v := countVotes(fanOut(ctx, l.nodes, l.opt.RequestTimeout, l.releaseOp(o.owner)))
	switch {
	case v.no > len(l.nodes)-l.quorum:
		return withNodeErrs(l.errorf("release: %w on %d of %d nodes", locks.ErrNotHeld, v.no, len(l.nodes)), v.errs)
	case v.yes+v.no < l.quorum:
		return withNodeErrs(l.errorf("release: %w: %d of %d nodes answered, %d needed",
			locks.ErrNoQuorum, v.yes+v.no, len(l.nodes), l.quorum), v.errs)
	}
	o.warn("released without every node; the others expire by TTL", v.errs)
	return nil
}

func (o *leaseOps) warn(msg string, errs []error) {
	if len(errs) > 0 {
		o.l.opt.Logger.Warn("lockproof: redlock "+msg, "lock", o.l.name, "err", errors.Join(errs...))
	}
}

// releaseOp runs releaseScript for owner on one node; true when it deleted.
func (l *Locker) releaseOp(owner string) func(context.Context, redis.UniversalClient) (bool, error) {
	return func(ctx context.Context, c redis.UniversalClient) (bool, error) {
		n, err := releaseScript.Run(ctx, c, []string{l.key}, owner, l.channel).Int64()
		return n == 1, err
	}
}
