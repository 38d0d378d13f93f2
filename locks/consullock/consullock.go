package consullock

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/locks"
)

// DefaultPrefix is the KV prefix of lock keys unless locks.WithPrefix says
// otherwise.
const DefaultPrefix = "lockproof/"

// Key returns the Consul KV key of lock name under prefix (the resolved
// locks.WithPrefix, DefaultPrefix by default): the two joined as they are,
// "lockproof/orders". The session that holds the key is the holder's. A
// Locker's Key method returns it.
func Key(prefix, name string) string { return layout.ConsulKey(prefix, name) }

// Bounds Consul puts on sessions.
const (
	// MinSessionTTL is Consul's default session_ttl_min: the shortest TTL
	// an agent with the default configuration accepts.
	MinSessionTTL = 10 * time.Second
	// MaxSessionTTL is Consul's fixed maximum session TTL.
	MaxSessionTTL = 24 * time.Hour
	// MaxLockDelay is the longest lock-delay Consul applies (it silently
	// caps longer ones, so they are rejected here instead).
	MaxLockDelay = 60 * time.Second
	// maxBlock bounds one blocking query (Consul's default wait).
	maxBlock = 5 * time.Minute
)

// Session holds the Consul-specific settings of NewWithSession.
type Session struct {
	// LockDelay is how long Consul grants the lock to nobody after a
	// session holding it is invalidated (TTL expiry, destroy): 0 (none) or
	// between 1ms and MaxLockDelay, taken as given. New uses
	// DefaultLockDelay(TTL).
	LockDelay time.Duration
	// TTLMin is the shortest session TTL the servers accept (their
	// session_ttl_min). Zero means Consul's default, MinSessionTTL.
	TTLMin time.Duration
}

// DefaultLockDelay is the lock-delay New uses: the TTL, capped at
// MaxLockDelay. A holder whose session is destroyed under it keeps a
// locally valid lease for at most one TTL from its last renewal; with a
// lock-delay of one TTL nobody else is granted the lock before that
// lease's local deadline has passed.
func DefaultLockDelay(ttl time.Duration) time.Duration { return min(ttl, MaxLockDelay) }

// Locker is one named lock on a Consul cluster. It is safe for concurrent
// use; every Lock or TryLock call works with a session of its own, so
// goroutines sharing a Locker exclude each other as separate processes do.
// Lock calls of one Locker queue locally, in arrival order, and only the
// first joins the lock's queue on the server, where waiters of every
// Locker queue: a release wakes the next waiter in line (see the package
// documentation).
type Locker struct {
	client    *api.Client
	name      string
	key       string
	opt       locks.Options
	reentry   *locks.Reentry // nil without locks.WithOwner
	lockDelay time.Duration
	gate      chan struct{} // held by the one Lock call of this Locker that contends on the server
	// admit, if not nil, replaces grant once an attempt has acquired the
	// key: a read-write mutex's view admits a reader or drains the
	// readers ahead of a writer. A nil lease and nil error mean refused.
	admit func(ctx context.Context, a *attempt) (locks.Lease, error)
}

var _ locks.Locker = (*Locker)(nil)

// New returns the lock called name on the Consul cluster behind client,
// with a lock-delay of DefaultLockDelay(TTL) and servers assumed to accept
// session TTLs from MinSessionTTL. Options: locks.WithTTL (between
// MinSessionTTL and MaxSessionTTL; default locks.DefaultTTL, 10s: the session
// TTL and the lease TTL), WithWatchdog, WithWaitBudget, WithRequestTimeout
// (bounds every request but blocking queries; default TTL/10), WithPrefix
// (default DefaultPrefix), WithClock, WithLogger, WithObserver, WithMaxHold,
// WithOwner (re-entry by the same owner through this Locker; another Locker
// with the same owner id contends as any other owner: see locks.WithOwner).
func New(client *api.Client, name string, opts ...locks.Option) (*Locker, error) {
	o, err := locks.Resolve(DefaultPrefix, opts...)
	if err != nil {
		return nil, fmt.Errorf("consullock: %w", err)
	}
	return NewWithSession(client, name, Session{LockDelay: DefaultLockDelay(o.TTL)}, opts...)
}

// NewWithSession is New with the Consul-specific settings s.
func NewWithSession(client *api.Client, name string, s Session, opts ...locks.Option) (*Locker, error) {
	return build(client, name, DefaultPrefix, s, opts)
}

// build validates the arguments and returns the Locker of the key name
// under the resolved prefix (defaultPrefix unless locks.WithPrefix says).
func build(client *api.Client, name, defaultPrefix string, s Session, opts []locks.Option) (*Locker, error) {
	if client == nil {
		return nil, fmt.Errorf("consullock: %w", locks.ErrNilClient)
	}
	if err := locks.ValidateName(name); err != nil {
		return nil, fmt.Errorf("consullock: %w", err)
	}
	o, err := locks.Resolve(defaultPrefix, opts...)
	if err != nil {
		return nil, fmt.Errorf("consullock: %w", err)
	}
	if err := validate(o, s); err != nil {
		return nil, fmt.Errorf("consullock: %w", err)
	}
	key := Key(o.Prefix, name)
	if err := validateKey(key); err != nil {
		return nil, fmt.Errorf("consullock: %w", err)
	}
	return &Locker{client: client, name: name, key: key, opt: o, lockDelay: s.LockDelay,
		reentry: locks.NewReentry(o),
		gate:    make(chan struct{}, 1)}, nil
}

// validate checks the TTL against Consul's session range and the
// lock-delay against what Consul applies as given.
func validate(o locks.Options, s Session) error {
	ttlMin := s.TTLMin
	switch {
	case ttlMin < 0 || ttlMin > MaxSessionTTL:
		return fmt.Errorf("%w: session TTL minimum %v out of [0, %v]", locks.ErrInvalidOption, ttlMin, MaxSessionTTL)
	case ttlMin == 0:
		ttlMin = MinSessionTTL
	}
	if o.TTL < ttlMin || o.TTL > MaxSessionTTL {
		return fmt.Errorf("%w: %v is outside Consul's session TTL range [%v, %v]", locks.ErrInvalidTTL, o.TTL, ttlMin, MaxSessionTTL)
	}
	if s.LockDelay != 0 && (s.LockDelay < time.Millisecond || s.LockDelay > MaxLockDelay) {
		// Consul reads a lock-delay below 1µs as seconds and caps one above
		// a minute: neither would be what the caller asked for.
		return fmt.Errorf("%w: lock-delay %v must be 0 or within [1ms, %v]", locks.ErrInvalidOption, s.LockDelay, MaxLockDelay)
	}
	return nil
}

// validateKey rejects keys Consul's HTTP API cannot address as given: a
// leading slash, and "." or ".." segments or repeated slashes, which the
// server's router cleans (redirecting the request elsewhere); and keys with
// a ".queue", ".permit" or ".reader" segment, which could be another lock's
// queue entry, a semaphore's permit or a read-write mutex's reader.
func validateKey(key string) error {
	p := "/" + key
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if strings.HasPrefix(key, "/") || clean != p {
		return fmt.Errorf("%w: Consul key %q is not a clean path (no leading slash, '//', '.' or '..' segments)",
			locks.ErrInvalidName, key)
	}
	for _, seg := range []string{queueSegment, layout.ConsulPermitSegment, layout.ConsulReaderSegment} {
		if slices.Contains(strings.Split(key, "/"), seg) {
			return fmt.Errorf("%w: Consul key %q has a %q segment, where locks keep their queues, permits and readers",
				locks.ErrInvalidName, key, seg)
		}
	}
	return nil
}

// Name returns the lock's name.
func (l *Locker) Name() string { return l.name }

// Key returns the Consul KV key of the lock: the prefix and the name.
func (l *Locker) Key() string { return l.key }

// LockDelay returns the lock-delay of the Locker's sessions.
func (l *Locker) LockDelay() time.Duration { return l.lockDelay }

// TryLock makes one attempt; it returns locks.ErrLocked when the lock is
// held, or under a lock-delay after its holder's session was invalidated.
func (l *Locker) TryLock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, true, l.tryLock)
}

// tryLock is TryLock without re-entry (see locks.WithOwner).
func (l *Locker) tryLock(ctx context.Context) (locks.Lease, error) {
	return l.tryOnce(ctx, (*attempt).try)
}

// tryOnce makes one attempt with a session of its own: acquire's nil
// lease and nil error mean refused (locks.ErrLocked). A refused or failed
// attempt releases what it may hold and destroys its session.
func (l *Locker) tryOnce(ctx context.Context, acquire func(*attempt, context.Context) (locks.Lease, error)) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, l.errorf("try lock: %w", err)
	}
	a, err := l.newAttempt(ctx)
	if err != nil {
		return nil, err
	}
	lease, err := acquire(a, ctx)
	switch {
	case err != nil:
		a.abandon()
		return nil, err
	case lease == nil:
		a.abandon()
		return nil, l.errorf("%w", locks.ErrLocked)
	}
	return lease, nil
}

// errSessionGone: the attempt's session no longer exists on the server
// (expired while waiting, or destroyed by someone else).
var errSessionGone = errors.New("consullock: session gone")

// errLost: the acquire succeeded but the key no longer showed the session
// when read back (invalidated in between).
var errLost = errors.New("consullock: lost between acquire and read")

func (l *Locker) errorf(format string, args ...any) error {
	return fmt.Errorf("consullock %q: "+format, append([]any{l.name}, args...)...)
}

// request bounds a non-blocking request by the request timeout.
func (l *Locker) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return locks.RequestContext(ctx, l.opt.RequestTimeout)
}

func writeOpts(ctx context.Context) *api.WriteOptions { return (&api.WriteOptions{}).WithContext(ctx) }
