package redlock

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/locks"
)

// DefaultPrefix is the key prefix used unless locks.WithPrefix says otherwise.
const DefaultPrefix = "lockproof:"

// Key returns the Redis key that holds lock name under prefix (the resolved
// locks.WithPrefix, DefaultPrefix by default) on every node: the prefix and
// the name in braces, "lockproof:{orders}", the key redislock uses for the
// same name. A Locker's Key method returns it.
func Key(prefix, name string) string { return layout.RedisKey(prefix, name) }

// Locker is one named lock held on a majority of N independent Redis
// servers. It is safe for concurrent use. Goroutines of one Locker that wait
// in Lock share one set of pub/sub subscriptions and take turns: only one of
// them at a time competes on the nodes.
type Locker struct {
	nodes   []node
	quorum  int
	name    string
	key     string
	channel string
	opt     locks.Options
	reentry *locks.Reentry // nil without locks.WithOwner
	gate    chan struct{}  // held by the goroutine of this Locker competing in Lock

	mu  sync.Mutex
	sub *subscription // open while any goroutine is waiting in Lock
}

var _ locks.Locker = (*Locker)(nil)

// New returns the lock called name on the Redis servers behind clients, one
// client per server. The servers must be independent (no replication between
// them); the lock is held while a majority, len(clients)/2+1, records it.
//
// Options: locks.WithTTL, WithWatchdog, WithWaitBudget, WithRequestTimeout
// (the bound on each request to each node, default TTL/10: keep it well below
// the TTL, since a slow node eats into the lease's validity), WithPrefix
// (default DefaultPrefix), WithClock, WithLogger, WithObserver, WithMaxHold,
// WithOwner (re-entry by the same owner through this Locker; another Locker
// with the same owner id contends as any other owner: see locks.WithOwner).
func New(clients []redis.UniversalClient, name string, opts ...locks.Option) (*Locker, error) {
	nodes, err := newNodes(clients)
	if err != nil {
		return nil, err
	}
	if err := locks.ValidateName(name); err != nil {
		return nil, fmt.Errorf("redlock: %w", err)
	}
	o, err := locks.Resolve(DefaultPrefix, opts...)
	if err != nil {
		return nil, fmt.Errorf("redlock: %w", err)
	}
	key := Key(o.Prefix, name)
	return &Locker{
		nodes:   nodes,
		quorum:  len(nodes)/2 + 1,
		name:    name,
		key:     key,
		channel: key + ":released",
		opt:     o,
		reentry: locks.NewReentry(o),
		gate:    make(chan struct{}, 1),
	}, nil
}

// newNodes numbers the clients, rejecting an empty list and nil clients
// (typed nil pointers included).
func newNodes(clients []redis.UniversalClient) ([]node, error) {
	if len(clients) == 0 {
		return nil, fmt.Errorf("redlock: %w: no clients", locks.ErrNilClient)
	}
	nodes := make([]node, len(clients))
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("redlock: %w: client %d", locks.ErrNilClient, i)
		}
		if v := reflect.ValueOf(c); v.Kind() == reflect.Pointer && v.IsNil() {
			return nil, fmt.Errorf("redlock: %w: client %d is a nil %T", locks.ErrNilClient, i, c)
		}
		nodes[i] = node{index: i, client: c}
	}
	return nodes, nil
}

// Name returns the lock's name.
func (l *Locker) Name() string { return l.name }

// Key returns the Redis key that holds the lock on every node. Releases are
// published on Key() + ":released".
func (l *Locker) Key() string { return l.key }

// Quorum returns how many nodes must record an acquisition: len(clients)/2+1.
func (l *Locker) Quorum() int { return l.quorum }

// TryLock makes one attempt on every node. It returns an error wrapping
// locks.ErrLocked when other owners hold the lock, and locks.ErrNoQuorum
// (joined with a *NodeError per failed node) when too few nodes answered, or
// a majority answered too late to leave the lease any validity.
func (l *Locker) TryLock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, true, l.tryLock)
}

// tryLock is TryLock without re-entry (see locks.WithOwner).
func (l *Locker) tryLock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, l.errorf("try lock: %w", err)
	}
	lease, _, err := l.acquireAs(ctx, locks.NewOwner())
	return lease, err
}

func (l *Locker) errorf(format string, args ...any) error {
	return fmt.Errorf("redlock %q: "+format, append([]any{l.name}, args...)...)
}
