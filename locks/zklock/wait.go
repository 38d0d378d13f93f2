package zklock

import (
	"cmp"
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/locks"
)

// errRequeue says a contender's node is gone, of another session, or won
// too late to use: Lock queues again with a new node.
var errRequeue = errors.New("zklock: requeue")

// Contender names: "_c_" + 32 hex digits (the GUID) + "-lock-" and the
// server's sequence number (layout.ZKProtected); a read-write mutex's have
// "__READ__" or "__WRIT__" for "lock-" (layout.ZKReadMarker).
const (
	protectedPrefix = layout.ZKProtected
	lockMarker      = layout.ZKMarker
)

// role is what a Locker's contenders are, which names them and says whom
// they wait behind.
type role int

const (
	roleLock   role = iota // a mutex's or a semaphore's: behind every contender
	roleReader             // a read-write mutex's reader: behind the writers alone
	roleWriter             // a read-write mutex's writer: behind every contender
)

// marker is what the role's contender names carry before the sequence
// number.
func (r role) marker() string {
	switch r {
	case roleReader:
		return layout.ZKReadMarker
	case roleWriter:
		return layout.ZKWriteMarker
	}
	return lockMarker
}

// contender is one Lock or TryLock call's place in the queue: its node.
type contender struct {
	guid    string
	base    string // the node's name before the sequence number
	prefix  string // the path the node is created with; the server appends the sequence
	name    string // the node's name once it exists, "" before
	path    string
	session int64 // the session the node was created in
	// fresh: the node is the one its create's reply named, sent while the
	// connection had session; not one adopted by its GUID (see recoverNode).
	fresh  bool
	listed bool // the lock's children were listed since the node was made
	// stat and watch: the node as read with a watch (readOwn) and that
	// watch, nil until then and after the watch fired while it waited;
	// a mutex's waiter of a node of its own create reads none.
	stat  *zk.Stat
	watch <-chan zk.Event
}

func newContender(l *Locker) *contender {
	g := locks.NewOwner()
	base := protectedPrefix + g + "-" + l.role.marker()
	return &contender{guid: g, base: base, prefix: l.path + "/" + base}
}

// mine reports whether child is c's node, by its GUID: c's name and a
// sequence number.
func (c *contender) mine(child string) bool {
	seq, ok := strings.CutPrefix(child, c.base)
	_, err := strconv.ParseInt(seq, 10, 64)
	return ok && err == nil
}

func (c *contender) set(l *Locker, name string, session int64, fresh bool) {
	c.name, c.path, c.session, c.fresh = name, l.path+"/"+name, session, fresh
}

// listing is what one listing of the lock's children says of a
// contender's node.
type listing struct {
	ahead []entry         // the contenders ahead of it that keep it waiting (see blockers)
	alone bool            // it was the lock node's only child
	pzxid int64           // the lock node's pzxid: the zxid of the last change to its children
	sent  time.Time       // when the listing was sent, on the Locker's clock
	watch <-chan zk.Event // a watch on the lock node's children, or nil (see position)
}

// entry is one contender as listed: its node's name and sequence number,
// and whether it is a read-write mutex's reader.
type entry struct {
	name   string
	seq    int64
	reader bool
}

// contenders returns the children that are contenders' nodes of l's kind
// in queue order, by the sequence number alone (as Curator's read-write
// lock sorts); other children are left alone.
func (l *Locker) contenders(kids []string) []entry {
	out := make([]entry, 0, len(kids)) // one allocation, not one per doubling
	for _, k := range kids {
		if e, ok := l.parse(k); ok {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// parse reads one child as a contender of l's kind.
func (l *Locker) parse(child string) (entry, bool) {
	if l.role == roleLock {
		s, ok := layout.ZKSequence(child)
		return entry{name: child, seq: s}, ok
	}
	s, write, ok := layout.ZKRWSequence(child)
	return entry{name: child, seq: s, reader: !write}, ok
}

// blockers returns the contenders of ahead (those before a contender of
// l's, in queue order) that keep it waiting: every one, but for a reader
// the writers only. Never one behind, which could deadlock
// (TestRWMutexQueueWatchesOnlyWhatItMust).
func (l *Locker) blockers(ahead []entry) []entry {
	if l.role != roleReader {
		return ahead
	}
	var out []entry
	for _, e := range ahead {
		if !e.reader {
			out = append(out, e)
		}
	}
	return out
}

// Lock waits until the lock is held, ctx ends (an error wrapping ctx.Err()),
// the wait budget runs out (locks.ErrWaitBudget) or the connection is
// closed.
//
// The contender creates its node (ephemeral, sequential, protected by its
// GUID) and lists the lock's children: with no node ahead of its own, it
// holds the lock. Otherwise it watches its immediate predecessor alone (no
// thundering herd) and, after every wake-up, lists the children again: the
// predecessor that went may have been a waiter that gave up, and the one
// before it still holds. It never polls. Requests that fail on a lost
// connection are retried after a short, growing, jittered pause; a create
// whose reply was lost is recognised by its GUID and adopted. A waiter whose
// node went (its session expired, or someone deleted it) queues again with
// a new node, at the back. A Lock that gives up deletes its node.
//
// Through a read-write mutex's reader (RWMutex.RLocker) only the writers'
// nodes count as ahead: the reader holds with none of them ahead of its
// own node, and watches the newest of them.
func (l *Locker) Lock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, false, l.lock)
}

// lock is Lock without re-entry (see locks.WithOwner).
func (l *Locker) lock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, l.errorf("lock: %w", err)
	}
	began := l.opt.Clock.Now()
	for {
		c, err := l.enqueue(ctx, newContender(l), began)
		if err != nil {
			return nil, err
		}
		lease, err := l.waitTurn(ctx, c, began)
		if !errors.Is(err, errRequeue) {
			return lease, err
		}
	}
}

// enqueue creates c's node, ephemeral and sequential, named with c's GUID.
// The parents are created where missing. A create whose outcome is unknown
// (the connection was lost after the request was sent) is followed by a
// look-up of the children for c's GUID: the node is adopted if it exists,
// created again if not. A create still in flight when ctx ends is left to
// finish in the background, and its node deleted if it was created.
func (l *Locker) enqueue(ctx context.Context, c *contender, began time.Time) (*contender, error) {
	budget, stop := l.budgetTimer(began)
	defer stop()
	unknown := false // a create of c's node may have been applied unseen
	for tries := 0; ; {
		var err error
		if unknown {
			var found bool
			if found, err = l.recoverNode(ctx, c); err == nil {
				if found {
					return c, nil
				}
				unknown = false
			}
		}
		if !unknown {
			err = l.create(ctx, c)
			switch {
			case err == nil:
				return c, nil
			case errors.Is(err, zk.ErrNoNode):
				err = l.ensureParents(ctx)
			case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrSessionMoved):
				unknown = true // the request was sent, its reply lost
			}
		}
		if err == nil {
			continue
		}
		if perr := l.pause(ctx, err, &tries, budget); perr != nil {
			if unknown {
				l.discardUnknown(c)
			}
			return nil, l.errorf("lock: create a node: %w", perr)
		}
	}
}

// create sends the create of c's node once. The request is bounded by ctx
// alone: go-zookeeper ends it in bounded time (see do), and a create given
// up on leaves an outcome to clean up. If ctx ends first, the create
// finishes in the background, which deletes the node if it was created;
// create waits up to the request timeout (wall time) for that, so that a
// Lock that gives up mostly returns with its node gone.
func (l *Locker) create(ctx context.Context, c *contender) error {
	session := l.conn.SessionID()
	var path string
	cleaned := make(chan struct{})
	err := l.do(ctx, "create", false, func() (err error) {
		path, err = l.conn.Create(c.prefix, nil, zk.FlagEphemeralSequential, l.acl)
		return err
	}, func(err error) {
		defer close(cleaned)
		switch {
		case err == nil:
			l.deleteNode(path)
		case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrSessionMoved):
			l.discardUnknown(c)
		}
	})
	switch {
	case err == nil:
		c.set(l, path[len(l.path)+1:], session, true)
	case errors.Is(err, errGaveUp):
		// The request timeout is wall time, as every request's bound
		// (locks.RequestContext), not the Locker's clock: a manual clock
		// that nobody moves while this call runs would hold it for good.
		wait, cancel := locks.RequestContext(context.WithoutCancel(ctx), l.opt.RequestTimeout)
		defer cancel()
		select {
		case <-cleaned:
		case <-wait.Done():
		}
	}
	return err
}

// recoverNode looks for c's node among the lock's children, by c's GUID,
// and adopts it if it is there.
func (l *Locker) recoverNode(ctx context.Context, c *contender) (bool, error) {
	session := l.conn.SessionID()
	kids, err := l.children(ctx)
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, k := range kids {
		if c.mine(k) {
			c.set(l, k, session, false)
			return true, nil
		}
	}
	return false, nil
}

// first lists the lock's children and reports whether fewer than
// l.permits of the contenders ahead of c's node keep it waiting (none, for
// a mutex; no writer, for a reader): it holds; errRequeue when the node is
// gone or its session was replaced.
func (l *Locker) first(ctx context.Context, c *contender) (listing, bool, error) {
	lst, err := l.position(ctx, c)
	return lst, err == nil && len(lst.ahead) < l.permits, err
}

// position lists the lock's children in queue order, finds c's node among
// them, and returns the contenders ahead of it that keep it waiting (see
// blockers), in queue order; errRequeue when the node is gone or its
// session was replaced (the connection has a new session: the old one
// expired, and its nodes with it). A node missing from the listing is
// always found out, never taken for the head of the queue (Curator's
// read-write lock once missed it: CURATOR-211, apache/curator#732).
//
// The listing sets a watch on the lock node's children as well when it
// may grant and the lease could keep that watch (see grant): the first
// listing after c's node was made, unless this Locker's last such listing
// found contenders beside its own (l.crowded), and, for a mutex's node of
// c's own create, every later one (a waiter's after a wake-up, which mostly
// grants). The lease then watches its node through that watch, with no
// request of its own; a watch the lease does not keep fires once, at the
// next change, and goes.
func (l *Locker) position(ctx context.Context, c *contender) (listing, error) {
	sent := l.opt.Clock.Now()
	first := !c.listed
	watch := first && !l.crowded.Load() || !first && c.fresh && l.fencedByListing()
	kids, st, ch, err := l.childrenStat(ctx, watch)
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		return listing{}, errRequeue
	case err != nil:
		return listing{}, err
	case l.conn.SessionID() != c.session:
		return listing{}, errRequeue
	}
	order := l.contenders(kids)
	i := slices.IndexFunc(order, func(e entry) bool { return e.name == c.name })
	if i < 0 {
		return listing{}, errRequeue
	}
	c.listed = true
	if first {
		l.crowded.Store(len(kids) > 1)
	}
	return listing{ahead: l.blockers(order[:i]), alone: len(kids) == 1, pzxid: st.Pzxid, sent: sent, watch: ch}, nil
}

// readOwn reads c's node with a watch: its czxid (the token), its owner and
// version, and a watch that fires when the node is deleted or its data
// changes, which the lease's monitor takes over (one getData for both).
// errRequeue: the node is gone, or is not of c's session, or the
// connection's session is no longer c's.
func (l *Locker) readOwn(ctx context.Context, c *contender) error {
	ch, st, ok, err := l.watch(ctx, c.path)
	switch {
	case err != nil:
		return err
	case !ok || st.EphemeralOwner != c.session || l.conn.SessionID() != c.session:
		return errRequeue
	}
	c.stat, c.watch = st, ch
	return nil
}

// waitTurn waits until fewer than l.permits contenders ahead of c's node
// keep it waiting (see first), then grants the lease. See Lock.
func (l *Locker) waitTurn(ctx context.Context, c *contender, began time.Time) (locks.Lease, error) {
	budget, stop := l.budgetTimer(began)
	defer stop()
	for tries := 0; ; {
		lst, err := l.position(ctx, c)
		if err == nil && len(lst.ahead) < l.permits {
			lease, err := l.grant(ctx, c, lst)
			if errors.Is(err, locks.ErrLeaseExpired) && ctx.Err() == nil {
				return nil, errRequeue // won too late to use it; grant passed the lock on
			}
			return lease, err
		}
		var chs []<-chan zk.Event
		if err == nil {
			var ok bool
			chs, ok, err = l.watchAhead(ctx, lst.ahead[len(lst.ahead)-l.permits:])
			if err == nil && !ok {
				continue // one of them went meanwhile: look again
			}
		}
		if err == nil && c.stat == nil && !(c.fresh && l.fencedByListing()) {
			// The read grant needs (the token, the owner, the watch of
			// the lease), done while it waits: the wake-up that lets it
			// hold then costs one listing. A mutex's node of its own
			// create needs none: the listing that grants gives the token
			// and the lease's watch (see grant).
			err = l.readOwn(ctx, c)
		}
		if err == nil {
			err = l.await(ctx, c, chs, budget)
		}
		switch {
		case err == nil:
			tries = 0
			continue
		case errors.Is(err, errRequeue), errors.Is(err, zk.ErrSessionExpired):
			l.abandon(c)
			return nil, errRequeue
		}
		if perr := l.pause(ctx, err, &tries, budget); perr != nil {
			l.abandon(c)
			return nil, l.errorf("lock: %w", perr)
		}
	}
}

// watchAhead sets a watch on each of the contenders just ahead of a
// waiter that keep it waiting (see blockers), as many as there are permits
// (the predecessor alone, for a mutex and a read-write mutex's writer; the
// newest writer ahead, for its reader). ok is false when one of them is
// gone already.
//
// The waiter holds once fewer than permits contenders are ahead of it.
// Watching only the one contender permits places ahead would miss that
// when a contender between goes first (a later holder releasing before an
// earlier one): the waiter would wait, with a permit free, for as long as
// the earlier holder holds. With all of them watched, whenever exactly
// permits contenders are ahead they are the watched ones (none went since
// the last listing, or a watch fired), so the release that frees a permit
// fires one. A release wakes at most permits waiters, those just behind.
func (l *Locker) watchAhead(ctx context.Context, ahead []entry) ([]<-chan zk.Event, bool, error) {
	chs := make([]<-chan zk.Event, 0, len(ahead))
	for _, e := range ahead {
		ch, _, ok, err := l.watch(ctx, l.path+"/"+e.name)
		if err != nil || !ok {
			return nil, false, err
		}
		chs = append(chs, ch)
	}
	return chs, true, nil
}

// await waits for one of the watches ahead to fire (nil: look again), ctx
// to end or the wait budget to run out. Should the watch on c's own node,
// if it read its node, fire meanwhile (its node deleted or changed), it
// looks again too, and reads its node again should it still wait.
func (l *Locker) await(ctx context.Context, c *contender, chs []<-chan zk.Event, budget <-chan time.Time) error {
	const budgetCase, ctxCase, ownCase = 0, 1, 2
	chosen, ev := 0, zk.Event{}
	if len(chs) == 1 { // a mutex's or a read-write mutex's waiter: no reflection
		select {
		case <-budget:
			chosen = budgetCase
		case <-ctx.Done():
			chosen = ctxCase
		case <-c.watch:
			chosen = ownCase
		case ev = <-chs[0]:
			chosen = ownCase + 1
		}
	} else {
		cases := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(budget)},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c.watch)},
		}
		for _, ch := range chs {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		var v reflect.Value
		chosen, v, _ = reflect.Select(cases)
		if chosen > ownCase {
			ev, _ = v.Interface().(zk.Event)
		}
	}
	switch chosen {
	case budgetCase:
		return l.errorf("lock: %w after %v", locks.ErrWaitBudget, l.opt.WaitBudget)
	case ctxCase:
		return l.errorf("lock: %w", ctx.Err())
	case ownCase:
		c.stat, c.watch = nil, nil
		return nil
	}
	if ev.Type != zk.EventNotWatching {
		return nil
	}
	if errors.Is(ev.Err, zk.ErrSessionExpired) {
		return errRequeue
	}
	if ev.Err != nil && !transient(ev.Err) {
		return ev.Err // the connection was closed
	}
	return nil
}

// abandon deletes a contender's node after a failed, refused or cancelled
// attempt (see discard).
func (l *Locker) abandon(c *contender) {
	if c.path != "" {
		l.deleteNode(c.path)
	}
}
