package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
)

// answer is one node's reply to the acquiring transaction.
type answer struct {
	ours   bool          // the key holds our owner
	holder string        // the owner holding the key, when not ours
	pttl   time.Duration // the holder's remaining TTL; <= 0 when unknown
}

// tally is what the nodes said to one acquisition attempt.
type tally struct {
	ours    int
	held    map[string]int // foreign owner -> nodes holding it
	minPTTL time.Duration  // smallest positive PTTL of a foreign key; 0 if none
	errs    []error        // one *NodeError per node that did not answer
	unsure  []node         // nodes that may hold our key: ours, or no answer
}

// hint tells a waiting Lock what a failed attempt saw.
type hint struct {
	held   map[string]int // foreign owner -> nodes holding it
	holder string         // the owner holding a majority, if any
	expiry time.Duration  // when the first foreign key expires, at the latest
	took   time.Duration  // how long the attempt took, on the Locker's clock
}

// acquireAs makes one Redlock attempt as owner, fresh for each attempt:
// SET NX PX on every node at once. The lock is held when a majority set it and validity remains
// (TTL - elapsed - drift, elapsed on the Locker's clock). Otherwise the owner
// is released on every node that may hold it, and the error says why.
func (l *Locker) acquireAs(ctx context.Context, owner string) (locks.Lease, hint, error) {
	start := l.opt.Clock.Now()
	rs := fanOut(ctx, l.nodes, l.opt.RequestTimeout, func(ctx context.Context, c redis.UniversalClient) (answer, error) {
		return l.setNX(ctx, c, owner)
	})
	t := l.count(rs)
	took := l.opt.Clock.Now().Sub(start)
	validity := l.opt.TTL - took - locks.Drift(l.opt.TTL)
	if t.ours >= l.quorum && validity > 0 {
		if len(t.errs) > 0 {
			l.opt.Logger.Warn("lockproof: redlock acquired without every node",
				"lock", l.name, "err", errors.Join(t.errs...))
		}
		return l.grant(ctx, owner, start), hint{}, nil
	}
	if t.ours >= l.quorum {
		// A majority granted, too late to leave any validity: the lock
		// was ours for a while, and is given back.
		locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointGrantedTooLate, Name: l.name})
	}
	l.abandon(ctx, owner, t.unsure)
	return nil, t.hint(l.quorum, l.opt.TTL, took), l.failure(ctx, t, validity)
}

// setNX runs, atomically on one node: SET key owner NX PX ttl, GET key,
// PTTL key. A key holding our owner is ours even if SET said no: go-redis
// may have retried a transaction whose first reply was lost.
func (l *Locker) setNX(ctx context.Context, c redis.UniversalClient, owner string) (answer, error) {
	var get *redis.StringCmd
	var pttl *redis.DurationCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SetArgs(ctx, l.key, owner, redis.SetArgs{Mode: "NX", TTL: l.opt.TTL})
		get = p.Get(ctx, l.key)
		pttl = p.PTTL(ctx, l.key)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) { // Nil: SET NX did not set
		return answer{}, err
	}
	holder, err := get.Result()
	if err != nil {
		return answer{}, fmt.Errorf("GET after SET NX: %w", err)
	}
	if holder == owner {
		return answer{ours: true}, nil
	}
	return answer{holder: holder, pttl: pttl.Val()}, nil
}

func (l *Locker) count(rs []result[answer]) tally {
	t := tally{held: map[string]int{}}
	for _, r := range rs {
		switch {
		case r.err != nil:
			t.errs = append(t.errs, r.nodeErr())
			t.unsure = append(t.unsure, r.node)
		case r.val.ours:
			t.ours++
			t.unsure = append(t.unsure, r.node)
		default:
			// The node answered that another owner holds the key: our
			// owner, fresh and sent nowhere else, cannot be there.
			t.held[r.val.holder]++
			if p := r.val.pttl; p > 0 && (t.minPTTL == 0 || p < t.minPTTL) {
				t.minPTTL = p
			}
		}
	}
	return t
}

// foreign returns how many nodes answered that another owner holds the key.
func (t tally) foreign() int {
	n := 0
	for _, c := range t.held {
		n += c
	}
	return n
}

func (t tally) hint(quorum int, ttl, took time.Duration) hint {
	h := hint{held: t.held, expiry: t.minPTTL, took: took}
	if h.expiry <= 0 {
		h.expiry = ttl // keys without a TTL, or none seen: look again a TTL later
	}
	for owner, n := range t.held {
		if n >= quorum {
			h.holder = owner
		}
	}
	return h
}

// failure explains a failed attempt: ctx's error, locks.ErrNoQuorum when
// too few nodes answered (or a majority answered too late), else
// locks.ErrLocked. Per-node errors are joined in either case.
func (l *Locker) failure(ctx context.Context, t tally, validity time.Duration) error {
	if err := ctx.Err(); err != nil {
		return l.errorf("acquire: %w", err)
	}
	answered := t.ours + t.foreign()
	var err error
	switch {
	case t.ours >= l.quorum:
		err = l.errorf("acquire: %w: a majority answered, but too late (validity %v)", locks.ErrNoQuorum, validity)
	case answered < l.quorum:
		err = l.errorf("acquire: %w: %d of %d nodes answered, %d needed",
			locks.ErrNoQuorum, answered, len(l.nodes), l.quorum)
	default:
		err = l.errorf("%w on %d of %d nodes", locks.ErrLocked, t.foreign(), len(l.nodes))
	}
	return withNodeErrs(err, t.errs)
}

// abandon releases a failed attempt's owner on every node that may hold it,
// ctx's cancellation notwithstanding: a node that set the key but whose reply
// was lost or late would otherwise block the lock until the TTL.
func (l *Locker) abandon(ctx context.Context, owner string, nodes []node) {
	if len(nodes) == 0 {
		return
	}
	rs := fanOut(context.WithoutCancel(ctx), nodes, l.opt.RequestTimeout, l.releaseOp(owner))
	if v := countVotes(rs); len(v.errs) > 0 {
		l.opt.Logger.Warn("lockproof: redlock could not clean up a failed attempt; its keys expire by TTL",
			"lock", l.name, "err", errors.Join(v.errs...))
	}
}

// grant wraps an acquisition in a managed lease, without a fencing token,
// and reports it to the observer.
func (l *Locker) grant(ctx context.Context, owner string, start time.Time) locks.Lease {
	spec := locks.LeaseSpec{Name: l.name, Token: 0, Fenced: false, Start: start}
	lease := locks.NewLease(spec, &leaseOps{l: l, owner: owner}, l.opt)
	locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: l.name})
	return lease
}
