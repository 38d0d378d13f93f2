package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/locks"
)

// DefaultPrefix is the parent path of every lock's node unless
// locks.WithPrefix says otherwise.
const DefaultPrefix = "/lockproof"

// ErrSessionLost means the ZooKeeper session that owned a contender's node
// expired or was closed: the server deleted the node with it. A holder's
// lease closes Done with an error wrapping both ErrSessionLost and
// locks.ErrNotHeld.
var ErrSessionLost = errors.New("zklock: session lost")

// Locker is one named lock on one ZooKeeper ensemble, through one
// connection. It is safe for concurrent use: every Lock or TryLock call
// creates a node of its own, so goroutines sharing a Locker (and its
// connection's session) queue as separate contenders. A Locker holds no
// goroutine while nobody waits and no lease is held, so it needs no Close;
// the connection stays the caller's to close.
type Locker struct {
	conn    *zk.Conn
	name    string
	opt     locks.Options
	reentry *locks.Reentry // nil without locks.WithOwner
	path    string         // the lock's node: the contenders are its children
	acl     []zk.ACL
	permits int  // the first permits contenders hold: 1 for a mutex
	role    role // a mutex's or semaphore's, or a read-write mutex's reader or writer
	// crowded: the last first listing of a contender's found other
	// children beside its own (see position).
	crowded atomic.Bool
}

var _ locks.Locker = (*Locker)(nil)

// New returns the lock called name on the ZooKeeper ensemble behind conn.
//
// Options: locks.WithTTL is the session timeout the server granted conn
// (default locks.DefaultTTL, 10s: connect with zk.Connect(servers,
// 10*time.Second) on a server whose maxSessionTimeout allows it, through
// HandshakeDialer). The lease
// is trusted for TTL − locks.Drift(TTL) after the last round trip that
// proved the session alive, which is safe only if the server will not
// expire the session sooner: never give a TTL above the granted timeout
// (servers clamp the requested one into [minSessionTimeout,
// maxSessionTimeout], by default 2 and 20 ticks). WithWatchdog (default on:
// the session is proved alive and the node checked every TTL/3),
// WithWaitBudget, WithRequestTimeout (default TTL/10: bounds every request
// but the create of a contender's node, which ctx bounds), WithPrefix (an
// absolute ZooKeeper path, default DefaultPrefix), WithClock (the local
// deadline, the watchdog's schedule, the wait budget and retry pauses),
// WithRand, WithLogger, WithObserver, WithMaxHold,
// WithOwner (re-entry by the same owner through this Locker; another Locker
// with the same owner id contends as any other owner: see locks.WithOwner).
//
// Names may hold any character locks.ValidateName accepts: "%", "/" and
// the characters ZooKeeper refuses in a path are percent-encoded, so that
// every lock is one node directly under the prefix (see NodePath).
func New(conn *zk.Conn, name string, opts ...locks.Option) (*Locker, error) {
	return build(conn, name, DefaultPrefix, 1, opts)
}

// DefaultSemaphorePrefix is the parent path of every semaphore's node
// unless locks.WithPrefix says otherwise: apart from the mutexes', so that
// a semaphore and a mutex of one name never share a node.
const DefaultSemaphorePrefix = "/lockproof-semaphore"

// NewSemaphore returns the semaphore called name of permits permits on the
// ZooKeeper ensemble behind conn: the mutex's queue (see New, whose
// options it takes) in which the first permits contenders hold. A Lock or
// TryLock holds one permit, a lease like the mutex's, fenced by its node's
// czxid (with one permit, as New's: see the package documentation); a
// waiter watches the node permits places ahead of its own, so a release
// wakes one waiter, and waiters are served in arrival order. A
// TryLock is refused when permits contenders are queued, and leaves no
// node behind. Its node is under DefaultSemaphorePrefix unless
// locks.WithPrefix says. Every semaphore of one name must agree on
// permits.
func NewSemaphore(conn *zk.Conn, name string, permits int, opts ...locks.Option) (*Locker, error) {
	if permits < 1 {
		return nil, fmt.Errorf("zklock: %w: %d permits (at least 1)", locks.ErrInvalidOption, permits)
	}
	return build(conn, name, DefaultSemaphorePrefix, permits, opts)
}

// build validates the arguments and returns the Locker whose first permits
// contenders hold, its node under the resolved prefix (defaultPrefix unless
// locks.WithPrefix says).
func build(conn *zk.Conn, name, defaultPrefix string, permits int, opts []locks.Option) (*Locker, error) {
	if conn == nil {
		return nil, fmt.Errorf("zklock: %w", locks.ErrNilClient)
	}
	if err := locks.ValidateName(name); err != nil {
		return nil, fmt.Errorf("zklock: %w", err)
	}
	o, err := locks.Resolve(defaultPrefix, opts...)
	if err != nil {
		return nil, fmt.Errorf("zklock: %w", err)
	}
	prefix := strings.TrimSuffix(o.Prefix, "/")
	if err := validatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("zklock: %w", err)
	}
	return &Locker{
		conn:    conn,
		name:    name,
		opt:     o,
		reentry: locks.NewReentry(o),
		path:    NodePath(prefix, name),
		acl:     zk.WorldACL(zk.PermAll),
		permits: permits,
	}, nil
}

// validatePrefix accepts an absolute ZooKeeper path ("" stands for the
// root, "/" with its slash trimmed) whose segments are neither empty nor
// "." nor "..", and hold no character ZooKeeper refuses.
func validatePrefix(p string) error {
	if p == "" {
		return nil
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("%w: prefix %q is not an absolute ZooKeeper path", locks.ErrInvalidOption, p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsFunc(seg, layout.ZKRefused) || !utf8.ValidString(seg) {
			return fmt.Errorf("%w: prefix %q is not a valid ZooKeeper path", locks.ErrInvalidOption, p)
		}
	}
	return nil
}

// NodePath returns the node of lock name under prefix (the resolved
// locks.WithPrefix, an absolute path, DefaultPrefix by default): the
// prefix, "/", and the name with "%", "/" and the characters ZooKeeper
// refuses percent-encoded, "/lockproof/a%2Fb" for lock "a/b". Its children
// are the contenders, "_c_<32 hex digits>-lock-<sequence>"; the one with the
// lowest sequence number holds the lock. A Locker's NodePath method returns
// it.
func NodePath(prefix, name string) string { return layout.ZKNode(prefix, name) }

// Name returns the lock's name.
func (l *Locker) Name() string { return l.name }

// NodePath returns the lock's node: the prefix, "/", and the name with "%",
// "/" and the characters ZooKeeper refuses percent-encoded. Its children
// are the contenders, "_c_<32 hex digits>-lock-<sequence>"; the one with the
// lowest sequence number holds the lock.
func (l *Locker) NodePath() string { return l.path }

// TryLock makes one attempt; it returns locks.ErrLocked when the lock is
// held or has waiters (for a semaphore: when its permits are all held or
// waited for; for a read-write mutex's reader: when a writer holds or
// waits). It first lists the lock's children and gives up at once if
// there are that many contenders in its way; otherwise it creates its
// node, and if contenders created meanwhile put it out of the holders'
// places, deletes the node again before returning locks.ErrLocked: a
// refused TryLock leaves nothing behind.
func (l *Locker) TryLock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, true, l.tryLock)
}

// tryLock is TryLock without re-entry (see locks.WithOwner).
func (l *Locker) tryLock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, l.errorf("try lock: %w", err)
	}
	kids, err := l.children(ctx)
	switch {
	case errors.Is(err, zk.ErrNoNode):
	case err != nil:
		return nil, l.errorf("try lock: %w", err)
	case len(l.blockers(l.contenders(kids))) >= l.permits:
		return nil, l.errorf("%w", locks.ErrLocked)
	}
	c, err := l.enqueue(ctx, newContender(l), l.opt.Clock.Now())
	if err != nil {
		return nil, err
	}
	lst, first, err := l.first(ctx, c)
	if err == nil && !first {
		err = l.errorf("%w", locks.ErrLocked)
	}
	if err != nil {
		l.abandon(c)
		if errors.Is(err, errRequeue) {
			err = l.errorf("try lock: %w: %w", ErrSessionLost, locks.ErrNotHeld)
		}
		return nil, err
	}
	lease, err := l.grant(ctx, c, lst)
	if errors.Is(err, errRequeue) {
		err = l.errorf("try lock: %w: %w", ErrSessionLost, locks.ErrNotHeld)
	}
	return lease, err
}

// grant turns a contender at the head of the queue, as lst (the listing
// that found it there) says, into a lease. The lease's validity starts when
// lst was sent: the listing proved the session alive (the connection still
// had c's session when its reply came), and the server, which heard from the
// session then, will not expire it before the TTL has passed from that
// moment.
//
// The token: a mutex's (fencedByListing) is the lock node's pzxid in lst,
// whatever the way c came to hold; any other holder's is its node's czxid,
// or that pzxid when lst found c's node the lock node's only child (the
// package documentation, "Fencing token", says why both are safe). The
// lease's watch: one set before the grant, on c's node (readOwn: a
// semaphore's or read-write mutex's waiter, or a node adopted by its GUID,
// reads it while it waits) or, for a node its own create made (c.fresh),
// on the lock node's children by lst itself; with neither (a contender
// that held at once without a watching listing, or an adopted node), grant
// reads c's node with a watch now, which also checks that the node is of
// c's session. errRequeue: the node or the session is gone.
func (l *Locker) grant(ctx context.Context, c *contender, lst listing) (locks.Lease, error) {
	start := lst.sent
	var czxid int64 // 0: not read yet (the monitor reads it)
	watch := c.watch
	switch {
	case c.stat != nil:
		czxid = c.stat.Czxid
	case c.fresh && lst.watch != nil && (lst.alone || l.fencedByListing()):
		watch = lst.watch
	default:
		start = l.opt.Clock.Now()
		err := l.readOwn(ctx, c)
		switch {
		case errors.Is(err, zk.ErrSessionExpired):
			return nil, errRequeue
		case errors.Is(err, errRequeue):
			l.abandon(c)
			return nil, errRequeue
		case err != nil:
			l.abandon(c)
			return nil, l.errorf("read the node: %w", err)
		}
		czxid, watch = c.stat.Czxid, c.watch
	}
	tok := czxid
	if czxid == 0 || l.fencedByListing() {
		tok = lst.pzxid
	}
	var version int32 // a node's data version is 0 when created
	if c.stat != nil {
		version = c.stat.Version
	}
	ops := &leaseOps{l: l, path: c.path, czxid: czxid, token: tok, version: version, session: c.session,
		watch: watch}
	lease := locks.NewLease(locks.LeaseSpec{Name: l.name, Token: locks.Token(tok), Fenced: true, Start: start}, ops, l.opt)
	if err := lease.GiveBackIfLate(ctx); err != nil { // deletes the node: the lock passes on
		return nil, l.errorf("acquired too late: %w", err)
	}
	ops.monitor(lease)
	locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: l.name, Token: locks.Token(tok), Fenced: true})
	return lease, nil
}

// fencedByListing reports whether l is a mutex (New, or NewSemaphore of
// one permit; not a read-write mutex's view), whose holders all take the
// granting listing's pzxid for their token (see grant).
func (l *Locker) fencedByListing() bool { return l.permits == 1 && l.role == roleLock }

func (l *Locker) errorf(format string, args ...any) error {
	return fmt.Errorf("zklock %q: "+format, append([]any{l.name}, args...)...)
}
