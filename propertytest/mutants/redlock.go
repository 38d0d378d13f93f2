package mutants

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redlock"
	"github.com/lockproof/lockproof/propertytest"
)

// redlockNodes is the number of Redis nodes of the Redlock mutant.
const redlockNodes = 5

func init() {
	register(Mutant{Name: "redlock-accepts-minority", Breaks: propertytest.Exclusivity,
		Bug:     "Redlock's quorum is computed as n/2 instead of n/2+1, so two nodes of five count as held: a client takes the nodes a holder missed while they were down",
		Factory: redlockFactory(redlockNodes / 2), Fixed: redlockFactory(redlockNodes/2 + 1),
		Options: claiming(propertytest.FaultCrash, propertytest.FaultNodeDown)})
}

// redlockFactory is the Factory of a quorumLocker needing quorum of five
// miniredis nodes in manual time, with one fault a Redlock claims to
// survive: nodes 0 and 1 down (a minority, stopped and restarted with
// their data), and the availability check.
func redlockFactory(quorum int) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		g, err := redisfake.StartCluster(redlockNodes, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the RedisCluster fake", g)
		down := func(nodes ...int) propertytest.Fault {
			return propertytest.Fault{Name: fmt.Sprintf("nodes %v down", nodes), Kind: propertytest.FaultNodeDown,
				Inject: func() error {
					for _, i := range nodes {
						g.Stop(i)
					}
					return nil
				},
				Heal: func() error {
					for _, i := range nodes {
						g.Restart(i, true)
					}
					return nil
				}}
		}
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				return newQuorumLocker(g.NewClients(), quorum, name, append(g.LockOptions(), opts...)...)
			},
			Clock: g.Clock(), Advance: g.Advance, Nodes: redlockNodes,
			StopNode: g.Stop, StartNode: func(i int) { g.Restart(i, true) },
			Faults:    []propertytest.Fault{down(0, 1)},
			InProcess: true,
		}, nil
	}
}

// quorumLocker is the Redlock algorithm over independent Redis nodes: SET
// NX PX with a fresh owner on every node at once, held when quorum nodes
// set it with validity left. With quorum a majority it is Redlock; with
// less it is the mutant. Leases carry no fencing token.
type quorumLocker struct {
	nodes  []redis.UniversalClient
	quorum int
	name   string
	key    string
	opt    locks.Options
}

var _ locks.Locker = (*quorumLocker)(nil)

func newQuorumLocker(nodes []redis.UniversalClient, quorum int, name string, opts ...locks.Option) (*quorumLocker, error) {
	if err := locks.ValidateName(name); err != nil {
		return nil, fmt.Errorf("mutants: %w", err)
	}
	o, err := locks.Resolve("mutants:", opts...)
	if err != nil {
		return nil, fmt.Errorf("mutants: %w", err)
	}
	return &quorumLocker{nodes: nodes, quorum: quorum, name: name, key: redlock.Key(o.Prefix, name), opt: o}, nil
}

// votes counts the nodes' answers to one operation.
type votes struct{ yes, no, failed int }

// each runs op on every node at once, each call bounded by the request
// timeout, and counts the answers.
func (l *quorumLocker) each(ctx context.Context, op func(ctx context.Context, c redis.UniversalClient) (bool, error)) votes {
	ctx, cancel := locks.RequestContext(ctx, l.opt.RequestTimeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var v votes
	for _, c := range l.nodes {
		wg.Go(func() {
			ok, err := op(ctx, c)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				v.failed++
			case ok:
				v.yes++
			default:
				v.no++
			}
		})
	}
	wg.Wait()
	return v
}

// TryLock makes one attempt. It returns locks.ErrLocked when the nodes
// answered that others hold the lock, locks.ErrNoQuorum when too few
// answered or the grant came too late to leave any validity.
func (l *quorumLocker) TryLock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mutants: try lock: %w", err)
	}
	start, owner := l.opt.Clock.Now(), locks.NewOwner()
	v := l.each(ctx, func(ctx context.Context, c redis.UniversalClient) (bool, error) {
		return c.SetNX(ctx, l.key, owner, l.opt.TTL).Result()
	})
	validity := l.opt.TTL - l.opt.Clock.Now().Sub(start) - locks.Drift(l.opt.TTL)
	if v.yes >= l.quorum && validity > 0 {
		lease := locks.NewLease(locks.LeaseSpec{Name: l.name, Start: start}, l.ops(owner), l.opt)
		locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: l.name})
		return lease, nil
	}
	_ = l.ops(owner).Release(context.WithoutCancel(ctx)) // owner-checked: only where it was set
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("mutants: acquire: %w", ctx.Err())
	case v.yes >= l.quorum || v.yes+v.no < l.quorum:
		return nil, fmt.Errorf("mutants: acquire: %w: %d set, %d held by others, %d failed", locks.ErrNoQuorum, v.yes, v.no, v.failed)
	}
	return nil, fmt.Errorf("mutants: %w on %d of %d nodes", locks.ErrLocked, v.no, len(l.nodes))
}

// Lock tries every TTL/4 of the Locker's clock until it holds the lock or
// ctx ends: a Redlock client without release notifications.
func (l *quorumLocker) Lock(ctx context.Context) (locks.Lease, error) {
	for {
		lease, err := l.TryLock(ctx)
		if err == nil || ctx.Err() != nil {
			return lease, err
		}
		if err := waitFor(ctx, l.opt.Clock, nil, l.opt.Clock.Now().Add(l.opt.TTL/4)); err != nil {
			return nil, fmt.Errorf("mutants: lock: %w", err)
		}
	}
}

func (l *quorumLocker) ops(owner string) quorumOps { return quorumOps{l: l, owner: owner} }

// quorumOps are one grant's owner-checked operations on every node.
type quorumOps struct {
	l     *quorumLocker
	owner string
}

// Renew resets the TTL on the nodes that still record the owner: it
// succeeds on quorum of them, and is refused once too few can still say yes.
func (o quorumOps) Renew(ctx context.Context) error {
	l := o.l
	v := l.each(ctx, func(ctx context.Context, c redis.UniversalClient) (bool, error) {
		n, err := renewScript.Run(ctx, c, []string{l.key}, o.owner, l.opt.TTL.Milliseconds()).Int64()
		return n == 1, err
	})
	return o.verdict("renew", v, v.yes >= l.quorum)
}

// Release deletes the key on the nodes that still record the owner.
func (o quorumOps) Release(ctx context.Context) error {
	l := o.l
	v := l.each(ctx, func(ctx context.Context, c redis.UniversalClient) (bool, error) {
		n, err := releaseScript.Run(ctx, c, []string{l.key}, o.owner).Int64()
		return n == 1, err
	})
	return o.verdict("release", v, v.yes+v.no >= l.quorum)
}

// verdict is nil when ok, locks.ErrNotHeld when the nodes that said no
// leave no quorum possible, else locks.ErrNoQuorum.
func (o quorumOps) verdict(what string, v votes, ok bool) error {
	switch {
	case v.no > len(o.l.nodes)-o.l.quorum:
		return fmt.Errorf("mutants: %s: %w on %d of %d nodes", what, locks.ErrNotHeld, v.no, len(o.l.nodes))
	case !ok:
		return fmt.Errorf("mutants: %s: %w: %d yes, %d no, %d failed", what, locks.ErrNoQuorum, v.yes, v.no, v.failed)
	}
	return nil
}
