package mutants

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
)

// seqFlaw is the one defect of a seqLocker.
type seqFlaw int

const (
	noSeqFlaw seqFlaw = iota
	// An attempt that is not first in line gives up without deleting its
	// node (micro-fan/aiozk PR #34, zk-ruby/zk issue #49).
	attemptNodeLeft
	// Done closes only when the server refuses a keep-alive, never when
	// the TTL ran out locally (etcd-io/etcd PR #5603).
	doneWaitsForServer
	// The lease's clock starts when the reply that told the contender it
	// is first arrived, not when it created its node
	// (mike-marcacci/node-redlock PR #167).
	deadlineFromReply
)

func init() {
	register(
		// micro-fan/aiozk PR #34, "Dead lock on acquire timeout": an
		// acquire that timed out left its znode behind; zk-ruby/zk issue
		// #49, "LockWaitTimeout causes lock to be forever unusable",
		// reports the same of zk's locker. The node lives as long as its
		// session, so the lock stays taken after its holder released it.
		Mutant{Name: "refused-attempt-node-left", Breaks: propertytest.DeadlockFreedom,
			Bug:     "a ZooKeeper-style lock whose TryLock, finding its sequential node not first, gives up without deleting the node (aiozk PR #34, zk-ruby issue #49): the node, kept by its live session, stands before every later contender after the holder unlocked",
			Factory: seqFactory(attemptNodeLeft), Fixed: seqFactory(noSeqFlaw), Options: claiming()},
		// mike-marcacci/node-redlock PR #167, "Fix extension failure
		// issue" (closed unmerged): it started the lease's timer once the
		// acquisition's replies were in; the maintainer answered that the
		// local expiration must never be later than Redis's. A Redlock
		// grant takes a round trip to each node; here the grant takes
		// two, the node's creation and the listing that shows it first.
		Mutant{Name: "deadline-from-reply", Breaks: propertytest.Exclusivity,
			Bug:     "the lease's local deadline counts the TTL from when the reply showing the contender first arrived (node-redlock PR #167), not from when its node was created, so time spent between the two requests is not discounted and the holder believes in its lease after the node's session ended",
			Factory: seqFactory(deadlineFromReply), Fixed: seqFactory(noSeqFlaw), Options: claiming()},
		// etcd-io/etcd PR #5603, "clientv3: close keepalive channel if
		// TTL locally exceeded": before it, a keep-alive channel (and so
		// concurrency.Session.Done) was closed only on the server's
		// answer, so a client that got none kept believing in its lease.
		Mutant{Name: "done-waits-for-server", Breaks: propertytest.Exclusivity,
			Bug:     "an etcd-style lease whose Done closes only when the server answers a keep-alive with \"lease not found\", not when its TTL ran out locally (before etcd PR #5603): a holder that stops renewing is never told its lease is gone",
			Factory: seqFactory(doneWaitsForServer), Fixed: seqFactory(noSeqFlaw), Options: claiming()},
	)
}

// seqFactory is the Factory of seqLockers with flaw f on one seqServer
// on a manual clock.
func seqFactory(f seqFlaw) propertytest.Factory {
	return func(propertytest.Env) (*propertytest.Backend, error) {
		clock := fakes.NewClock(epoch)
		s := &seqServer{clock: clock, nodes: map[locks.Token]time.Time{}}
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				if err := locks.ValidateName(name); err != nil {
					return nil, fmt.Errorf("mutants: %w", err)
				}
				o, err := locks.Resolve("", append([]locks.Option{locks.WithClock(clock)}, opts...)...)
				if err != nil {
					return nil, fmt.Errorf("mutants: %w", err)
				}
				return &seqLocker{s: s, name: name, opt: o, flaw: f}, nil
			},
			Clock:     clock,
			Advance:   clock.Advance,
			InProcess: true,
		}, nil
	}
}

// seqServer is an in-memory lock service of the ZooKeeper and etcd kind,
// for one lock: every contender creates a node numbered in creation order,
// bound to a session of its own that ends a TTL after it was created or
// last kept alive, and the node goes with it. The holder is the live node
// with the lowest number, which is also its fencing token. Every request
// passes locks.GateRequest with the caller's context first, so that a
// scheduler can interleave the requests of several clients. Safe for
// concurrent use.
type seqServer struct {
	clock locks.Clock

	mu    sync.Mutex
	last  locks.Token
	nodes map[locks.Token]time.Time // node -> when its session ends
}

// request runs f under the server's lock once the gate let the request
// through, unless ctx ended meanwhile.
func (s *seqServer) request(ctx context.Context, what string, f func(now time.Time) error) error {
	done := locks.GateRequest(ctx, "seq "+what)
	defer done()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mutants: %s: %w", what, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	for n, ends := range s.nodes {
		if !now.Before(ends) {
			delete(s.nodes, n) // its session expired
		}
	}
	return f(now)
}

// create adds a node whose session lasts ttl and returns its number.
func (s *seqServer) create(ctx context.Context, ttl time.Duration) (n locks.Token, err error) {
	err = s.request(ctx, "create", func(now time.Time) error {
		s.last++
		n = s.last
		s.nodes[n] = now.Add(ttl)
		return nil
	})
	return n, err
}

// first returns the lowest live node (0 when there is none) and whether
// node n is still there.
func (s *seqServer) first(ctx context.Context, n locks.Token) (low locks.Token, live bool, err error) {
	err = s.request(ctx, "children", func(time.Time) error {
		if len(s.nodes) > 0 {
			low = slices.Min(keys(s.nodes))
		}
		_, live = s.nodes[n]
		return nil
	})
	return low, live, err
}

// keepAlive extends node n's session by ttl from now.
func (s *seqServer) keepAlive(ctx context.Context, n locks.Token, ttl time.Duration) error {
	return s.request(ctx, "keepalive", func(now time.Time) error {
		if _, ok := s.nodes[n]; !ok {
			return fmt.Errorf("mutants: keepalive: node %d: %w", n, locks.ErrNotHeld)
		}
		s.nodes[n] = now.Add(ttl)
		return nil
	})
}

// remove deletes node n.
func (s *seqServer) remove(ctx context.Context, n locks.Token) error {
	return s.request(ctx, "delete", func(time.Time) error {
		if _, ok := s.nodes[n]; !ok {
			return fmt.Errorf("mutants: delete: node %d: %w", n, locks.ErrNotHeld)
		}
		delete(s.nodes, n)
		return nil
	})
}

func keys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// seqLocker is one client of a seqServer.
type seqLocker struct {
	s    *seqServer
	name string
	opt  locks.Options
	flaw seqFlaw
}

var _ locks.Locker = (*seqLocker)(nil)

// TryLock creates a node and holds the lock if it is the first; if not,
// it deletes the node again (attemptNodeLeft: it does not) and returns
// locks.ErrLocked. A node whose session ended before the listing is an
// attempt of unknown outcome (locks.ErrLeaseExpired), which ends Lock.
func (l *seqLocker) TryLock(ctx context.Context) (locks.Lease, error) {
	n, err := l.s.create(ctx, l.opt.TTL)
	if err != nil {
		return nil, err
	}
	first, live, err := l.s.first(ctx, n)
	switch {
	case err != nil:
		l.abandon(ctx, n)
		return nil, err
	case !live:
		// Its session ended before the contender learned where it stood:
		// it may have held the lock meanwhile, unknowing. Not a refusal.
		return nil, fmt.Errorf("mutants: node %d: %w before it was seen", n, locks.ErrLeaseExpired)
	case first != n:
		err := fmt.Errorf("mutants: node %d waits behind %d: %w", n, first, locks.ErrLocked)
		if l.flaw != attemptNodeLeft {
			_ = l.s.remove(context.WithoutCancel(ctx), n)
		}
		return nil, err
	}
	start := l.opt.Clock.Now()
	if l.flaw != deadlineFromReply {
		// The node became first when its predecessor went, maybe long after
		// it was created: the session is kept alive from now, so that the
		// lease counts from a moment after the grant, as etcd's and
		// Curator's recipes do on acquiring.
		if err := l.s.keepAlive(ctx, n, l.opt.TTL); err != nil {
			l.abandon(ctx, n)
			return nil, fmt.Errorf("mutants: node %d: keep alive on grant: %w", n, err)
		}
	}
	lease, err := handOver(ctx, locks.NewLease(locks.LeaseSpec{Name: l.name, Token: n, Fenced: true, Start: start},
		seqOps{s: l.s, n: n, ttl: l.opt.TTL}, l.opt), l.opt)
	if err == nil && l.flaw == doneWaitsForServer {
		lease = newQuietLease(lease, true)
	}
	return lease, err
}

// abandon deals with node n of an attempt that ended (its context did)
// before it learned where it stood: a node behind another is deleted; a
// node that is first may be holding the lock already and is left to end
// with its session, as a crashed holder's would.
func (l *seqLocker) abandon(ctx context.Context, n locks.Token) {
	ctx = context.WithoutCancel(ctx)
	if first, live, err := l.s.first(ctx, n); err == nil && live && first != n {
		_ = l.s.remove(ctx, n)
	}
}

// Lock retries TryLock every TTL/10 of the Locker's clock.
func (l *seqLocker) Lock(ctx context.Context) (locks.Lease, error) {
	return retryEvery(ctx, l.opt, l.TryLock)
}

// seqOps are one grant's keep-alive and release.
type seqOps struct {
	s   *seqServer
	n   locks.Token
	ttl time.Duration
}

// Renew keeps the node's session alive for another TTL.
func (o seqOps) Renew(ctx context.Context) error { return o.s.keepAlive(ctx, o.n, o.ttl) }

// Release deletes the node.
func (o seqOps) Release(ctx context.Context) error { return o.s.remove(ctx, o.n) }
