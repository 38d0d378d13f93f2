package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/locks"
)

// DefaultPrefix is the key prefix used unless locks.WithPrefix says otherwise.
const DefaultPrefix = "lockproof/"

// MinTTL is the shortest TTL accepted: etcd leases last whole seconds.
const MinTTL = time.Second

// ErrSessionLost means the etcd lease of an acquisition or of a waiter was
// revoked or expired on the server, which deleted its key. A waiter that
// loses its lease gets an error wrapping both ErrSessionLost and
// locks.ErrNotHeld from Lock; a holder's lease closes Done with such an error.
var ErrSessionLost = errors.New("etcdlock: session lease lost")

// Locker is one named lock on one etcd cluster. It is safe for concurrent
// use: each Lock or TryLock in progress, and each lease held, has an etcd
// lease (a session) of its own, so goroutines of one process queue as
// separate contenders. Sessions are reused from one acquisition to the next
// while they live; a Locker holds no goroutine and no stream while nobody
// waits and no lease is held, so it needs no Close.
type Locker struct {
	client  *clientv3.Client
	name    string
	opt     locks.Options
	reentry *locks.Reentry // nil without locks.WithOwner
	naive   bool
	key     string // queue: the contenders' prefix, ending in "/"; naive: the lock key
	ttlSec  int64
	permits int    // the contenders that hold at once: 1 but for NewSemaphore
	tag     string // between key and a contender's lease id: "" but for NewRWMutex's "r" and "w"
	ahead   string // the prefix of the keys a contender waits behind: key, but a reader's writers

	mu   sync.Mutex
	idle []*session // live sessions nobody uses, most recently used last
}

var _ locks.Locker = (*Locker)(nil)

// New returns the lock called name on the etcd cluster behind client, in
// queue mode: contenders queue by create revision and each waiter watches
// only its predecessor.
//
// Options: locks.WithTTL (at least MinTTL; etcd's lease is the TTL rounded up
// to whole seconds, and the local Deadline uses the TTL itself),
// WithWatchdog, WithWaitBudget, WithRequestTimeout (bounds each renewal and
// the clean-up a waiter sends when it gives up; the caller's requests are
// bounded by their ctx), WithPrefix (default DefaultPrefix), WithClock (for
// the local deadline, renewal schedule and wait budget; etcd's own lease
// TTLs follow the server's clock), WithLogger, WithObserver, WithMaxHold,
// WithOwner (re-entry by the same owner through this Locker; another Locker
// with the same owner id contends as any other owner: see locks.WithOwner).
func New(client *clientv3.Client, name string, opts ...locks.Option) (*Locker, error) {
	return build(client, name, false, DefaultPrefix, 1, opts)
}

// DefaultSemaphorePrefix is the key prefix of NewSemaphore unless
// locks.WithPrefix says otherwise. It differs from DefaultPrefix so that no
// semaphore's keys fall in a lock's key range.
const DefaultSemaphorePrefix = "lockproof-semaphore/"

// NewSemaphore returns the counting semaphore called name, of permits
// permits (at least 1), on the etcd cluster behind client: a Locker whose
// Lock and TryLock take one permit, each a lease as New's (its key bound
// to an etcd lease of its own, fenced by the key's create revision, which
// grows across every grant of the semaphore). It takes New's options, with
// DefaultSemaphorePrefix as the default prefix.
//
// Contenders queue by create revision as in New, and the first permits
// keys hold. A waiter watches the lock's prefix for the deletion of any of
// the permits keys just ahead of its own (any of them may be the first to
// go, and each such deletion frees it a permit when no other key went
// since), and then looks again: a release makes at most permits waiters
// look again, though every waiter receives the deletion event. TryLock reads how many keys
// there are and, when fewer than permits, puts its key in a transaction
// that fails if any key was put since the read (it then reads again), so
// that a TryLock that does not win leaves no key behind. Every Semaphore
// of one name must be made with the same number of permits, and no lock
// made with New may share its prefix and name.
func NewSemaphore(client *clientv3.Client, name string, permits int, opts ...locks.Option) (*Locker, error) {
	if permits < 1 {
		return nil, fmt.Errorf("etcdlock: %w: %d permits (at least 1)", locks.ErrInvalidOption, permits)
	}
	return build(client, name, false, DefaultSemaphorePrefix, permits, opts)
}

// NewNaive returns the lock called name in naive mode, which exists only so
// that the benchmarks can show what queue mode saves: every waiter watches
// the one lock key and, when it is deleted, all of them race to create it
// again (a thundering herd: each hand-off wakes every waiter, and the order
// of service is random). It is as safe as queue mode (fenced by the key's
// create revision, owner-checked unlock), only slower and unfair. Do not use
// it for anything else, and never mix modes on one lock name: the two modes
// use different keys and do not exclude each other.
func NewNaive(client *clientv3.Client, name string, opts ...locks.Option) (*Locker, error) {
	return build(client, name, true, DefaultPrefix, 1, opts)
}

func build(client *clientv3.Client, name string, naive bool, prefix string, permits int, opts []locks.Option) (*Locker, error) {
	if client == nil {
		return nil, fmt.Errorf("etcdlock: %w", locks.ErrNilClient)
	}
	if err := locks.ValidateName(name); err != nil {
		return nil, fmt.Errorf("etcdlock: %w", err)
	}
	o, err := locks.Resolve(prefix, opts...)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: %w", err)
	}
	if o.TTL < MinTTL {
		return nil, fmt.Errorf("etcdlock: %w: %v (etcd leases last whole seconds: at least %v)", locks.ErrInvalidTTL, o.TTL, MinTTL)
	}
	key := layout.EtcdKey(o.Prefix, name, naive)
	return &Locker{
		client:  client,
		name:    name,
		opt:     o,
		reentry: locks.NewReentry(o),
		naive:   naive,
		key:     key,
		ttlSec:  int64((o.TTL + time.Second - 1) / time.Second),
		permits: permits,
		ahead:   key,
	}, nil
}

// Key returns where the queue-mode lock name lives under prefix (the
// resolved locks.WithPrefix, DefaultPrefix by default): the prefix of its
// contenders' keys, the prefix, the name with "%" and "/" percent-encoded,
// and "/" ("lockproof/a%2Fb/" for lock "a/b"). Each contender's key is Key
// + the hex id of its lease; the holder's has the smallest create
// revision. A queue-mode Locker's Key method returns it.
func Key(prefix, name string) string { return layout.EtcdKey(prefix, name, false) }

// Name returns the lock's name.
func (l *Locker) Name() string { return l.name }

// Key returns where the lock lives in etcd: in queue mode the prefix of the
// contenders' keys (each is Key() + the hex id of its lease; the holder is
// the one with the smallest create revision), in naive mode the lock key.
// "%" and "/" in the name are percent-encoded.
func (l *Locker) Key() string { return l.key }

// contenderKey returns the key a contender with session s puts.
func (l *Locker) contenderKey(s *session) string {
	if l.naive {
		return l.key
	}
	return l.key + l.tag + strconv.FormatInt(int64(s.id), 16)
}

// TryLock makes one attempt; it returns locks.ErrLocked when the lock is
// held. It is a single transaction that creates the contender's key only if
// no key of the lock exists (queue mode: no holder and no waiter), so a
// TryLock that does not win leaves no key behind. A request that gets no
// answer within the request timeout (a member frozen or cut off, which
// etcd's client sends every third request to) is sent again while ctx
// lasts, with a new lease for the transaction: the one unanswered is
// revoked, and its key, should the transaction be applied late, with it.
func (l *Locker) TryLock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, true, l.tryLock)
}

// tryLock is TryLock without re-entry (see locks.WithOwner).
func (l *Locker) tryLock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, l.errorf("try lock: %w", err)
	}
	// Sessions whose transaction got no answer are revoked once TryLock
	// returns, not between its tries: with the revoke, a try would send as
	// many requests (grant, transaction, revoke) as a cluster has members,
	// and etcd's client, which sends requests to the members in turn,
	// would send every try's transaction to the same member.
	var unanswered []*session
	defer func() {
		if len(unanswered) > 0 {
			go func() { // bounded by the request timeout each; not the caller's to wait for
				for _, s := range unanswered {
					l.discard(s) // the put may have been applied: its key goes with the lease
				}
			}()
		}
	}()
	for {
		s, err := l.take(ctx)
		if err != nil {
			return nil, err
		}
		key := l.contenderKey(s)
		free, full, err := l.freeIf(ctx)
		if err != nil {
			l.putIdle(s)
			return nil, l.errorf("try lock: %w", err)
		}
		if full {
			l.putIdle(s)
			return nil, l.errorf("%w", locks.ErrLocked)
		}
		var resp *clientv3.TxnResponse
		err = l.bounded(ctx, func(ctx context.Context) (err error) {
			resp, err = l.client.Txn(ctx).If(free...).Then(clientv3.OpPut(key, "", clientv3.WithLease(s.id))).Commit()
			return err
		})
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			continue // the idle session expired just now: take another
		}
		if errors.Is(err, errRequestTimeout) {
			unanswered = append(unanswered, s)
			continue // a member that does not answer: the next request goes to another
		}
		if err != nil {
			l.discard(s) // the put may have been applied: its key goes with the lease
			return nil, l.errorf("try lock: %w", err)
		}
		if !resp.Succeeded {
			l.putIdle(s)
			if l.permits > 1 {
				continue // a key was put since the count: count again
			}
			return nil, l.errorf("%w", locks.ErrLocked)
		}
		return l.grant(ctx, s, key, resp.Header.Revision)
	}
}

// freeIf returns the condition under which a TryLock's put holds: for a
// lock, that no key of it exists; for a semaphore, read now, that none was
// put since fewer than permits were counted (full: permits or more were).
func (l *Locker) freeIf(ctx context.Context) (free []clientv3.Cmp, full bool, err error) {
	if l.permits == 1 {
		cmp := clientv3.Compare(clientv3.CreateRevision(l.ahead), "=", 0)
		if !l.naive {
			cmp = cmp.WithPrefix()
		}
		return []clientv3.Cmp{cmp}, false, nil
	}
	var resp *clientv3.GetResponse
	err = l.resend(ctx, func(ctx context.Context) (err error) {
		resp, err = l.client.Get(ctx, l.key, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if resp.Count >= int64(l.permits) {
		return nil, true, nil
	}
	return []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(l.key), "<", resp.Header.Revision+1).WithPrefix()}, false, nil
}

// aheadOp reads the keys created before maxRev (none: every key), newest
// first, as many as there are permits: the contender they precede holds
// when there are fewer, and otherwise waits for the oldest of them.
func (l *Locker) aheadOp(maxRev int64) clientv3.Op {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
		clientv3.WithLimit(int64(l.permits))}
	if maxRev > 0 {
		opts = append(opts, clientv3.WithMaxCreateRev(maxRev))
	}
	return clientv3.OpGet(l.ahead, opts...)
}

// grant wraps a won acquisition in a managed lease and reports it to the
// observer. A session last renewed long ago is renewed first, so that the
// lease starts with most of its TTL. An acquisition whose validity had
// already run out (the client paused longer than the TTL) is released and
// reported as locks.ErrLeaseExpired, never returned as held.
func (l *Locker) grant(ctx context.Context, s *session, key string, rev int64) (locks.Lease, error) {
	ops := &leaseOps{l: l, s: s, key: key, rev: rev}
	if !l.fresh(s) {
		if err := l.renewOwn(ctx, s, key, rev); err != nil {
			if !errors.Is(err, locks.ErrNotHeld) {
				l.abandon(s, key, rev)
			}
			return nil, l.errorf("acquired, then: %w", err)
		}
	}
	tok := locks.Token(rev)
	lease := locks.NewLease(locks.LeaseSpec{Name: l.name, Token: tok, Fenced: true, Start: s.renewedAt()}, ops, l.opt)
	if err := lease.GiveBackIfLate(ctx); err != nil { // the release passes the lock on
		return nil, l.errorf("acquired too late: %w", err)
	}
	locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: l.name, Token: tok, Fenced: true})
	return lease, nil
}

// release deletes key if it still has create revision rev: the key of this
// acquisition and no later one. It reports whether it deleted it. The
// transaction is idempotent, so a transient failure (a member went away, or
// no answer within the request timeout: see bounded) is retried while ctx
// lasts, for at most one TTL: by then the key has expired with its
// unrenewed lease anyway.
func (l *Locker) release(ctx context.Context, key string, rev int64) (bool, error) {
	start := l.opt.Clock.Now()
	for tries := 1; ; tries++ {
		var resp *clientv3.TxnResponse
		err := l.bounded(ctx, func(ctx context.Context) (err error) {
			resp, err = l.client.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
				Then(clientv3.OpDelete(key)).
				Commit()
			return err
		})
		if err == nil {
			return resp.Succeeded, nil
		}
		if ctx.Err() != nil {
			return false, fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		}
		if !transient(err) || l.opt.Clock.Now().Sub(start) >= l.opt.TTL {
			return false, err
		}
		t := l.opt.Clock.NewTimer(l.opt.Backoff(tries))
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		}
	}
}

// abandon deletes a waiter's key after a failed or cancelled wait, passing
// the lock on if it had just been granted, and keeps the session for reuse
// when that worked.
func (l *Locker) abandon(s *session, key string, rev int64) {
	ctx, cancel := locks.RequestContext(context.Background(), l.opt.RequestTimeout)
	defer cancel()
	ok, err := l.release(ctx, key, rev)
	switch {
	case err != nil:
		l.opt.Logger.Warn("lockproof: could not delete a waiter's key; it goes with its lease's TTL",
			"lock", l.name, "key", key, "err", err)
	case ok:
		l.putIdle(s)
	}
}

// discard revokes session s after a request whose outcome is unknown (it
// failed or was cancelled in flight, and may have put a key): the server
// deletes every key bound to the lease with it.
func (l *Locker) discard(s *session) {
	ctx, cancel := locks.RequestContext(context.Background(), l.opt.RequestTimeout)
	defer cancel()
	if _, err := l.client.Revoke(ctx, s.id); err != nil {
		l.opt.Logger.Warn("lockproof: could not revoke a lease after a failed request; its key goes with its TTL",
			"lock", l.name, "lease", fmt.Sprintf("%x", int64(s.id)), "err", err)
	}
}

func (l *Locker) errorf(format string, args ...any) error {
	return fmt.Errorf("etcdlock %q: "+format, append([]any{l.name}, args...)...)
}

// leaseOps are the owner-checked operations on one acquisition: its key with
// its create revision, and its session.
type leaseOps struct {
	l   *Locker
	s   *session
	key string
	rev int64
}

// Renew keeps the session's lease alive, then checks that the key is still
// this acquisition's. Both requests are sent again, to the next member,
// while one gets no answer within the request timeout (a member frozen or
// cut off, whose connection stays open) and ctx lasts.
func (o *leaseOps) Renew(ctx context.Context) error {
	if err := o.l.renewOwn(ctx, o.s, o.key, o.rev); err != nil {
		return err
	}
	there, err := o.l.keyThere(ctx, o.s, o.key, o.rev)
	switch {
	case err != nil:
		return fmt.Errorf("etcdlock: %w", err)
	case !there:
		return fmt.Errorf("etcdlock: key %s is gone: %w", o.key, locks.ErrNotHeld)
	}
	return nil
}

// Release deletes the key only while it has this acquisition's create
// revision, so it never releases another holder; the session is then free
// for the next acquisition.
func (o *leaseOps) Release(ctx context.Context) error {
	ok, err := o.l.release(ctx, o.key, o.rev)
	if err != nil {
		return fmt.Errorf("etcdlock: %w", err)
	}
	if !ok {
		return fmt.Errorf("etcdlock: key %s is gone: %w", o.key, locks.ErrNotHeld)
	}
	o.l.putIdle(o.s)
	return nil
}
