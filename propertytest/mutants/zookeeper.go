package mutants

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
)

func init() {
	register(Mutant{
		Name: "zk-waiter-without-recheck",
		Bug: "a ZooKeeper lock whose waiter takes the deletion of its predecessor's node as its turn, " +
			"without listing the children again: the predecessor may have been a waiter that gave up, with the holder still ahead",
		Breaks: propertytest.Exclusivity,
		// The holder may renew at the very instant the waiter is granted
		// (manual time stands still between the two): ordered grant first,
		// the history reads as a renewal that succeeded for an owner who
		// no longer held, and the suite names symmetry, the same two
		// holders seen from the other side (LOCKPROOF_DEEP, seed
		// 1321272182841802572).
		AlsoBreaks: []propertytest.Property{propertytest.Symmetry},
		Factory:    zkRecipe(zkFlaws{noRecheck: true}),
		Fixed:      zkRecipe(zkFlaws{}),
		Options:    claiming(),
	})
	register(Mutant{
		Name: "zk-cancelled-waiter-node-left",
		Bug: "a ZooKeeper lock whose Lock, when its caller gives up waiting, returns without deleting its node: " +
			"the node stays ahead of every later contender for as long as the session lives",
		Breaks:  propertytest.DeadlockFreedom,
		Factory: zkRecipe(zkFlaws{leaveOnCancel: true}),
		Fixed:   zkRecipe(zkFlaws{}),
		Options: claiming(),
	})
	register(Mutant{
		Name: "zk-renew-checks-session-only",
		Bug: "a ZooKeeper lock whose renewal proves the session alive but not that the lease's node still exists: " +
			"a holder whose node is gone goes on believing it holds the lock",
		Breaks: propertytest.Symmetry,
		// The renewal the server should have refused also extends the
		// lease the holder believes in: when another client is granted the
		// lock within it, the history reads best as that double grant
		// (seed 962220972642636156), the harm both reports describe.
		AlsoBreaks: []propertytest.Property{propertytest.Exclusivity},
		Factory:    zkRecipe(zkFlaws{renewSessionOnly: true}),
		Fixed:      zkRecipe(zkFlaws{}),
		Options:    claiming(),
	})
}

// zkFlaws are the bugs of a zkRecipe lock, one per mutant.
//
//   - noRecheck, zk-waiter-without-recheck: once the watch on its
//     predecessor fires, a waiter holds. The recipe says to list the
//     children again, as the predecessor may have left the queue without
//     having held the lock. Proposed as a simplification in the review of
//     CDAP's ReentrantDistributedLock ("if the nodeToWatch is removed …
//     this lock becomes the owner (meaning no need to call doAcquire
//     again)", https://github.com/cdapio/cdap/pull/1241); Curator's
//     LockInternals and go-zookeeper's zk.Lock list the children again.
//   - leaveOnCancel, zk-cancelled-waiter-node-left: a Lock that gives up
//     (its context ends) returns with its node still queued. CURATOR-79,
//     "InterProcessMutex doesn't clean up after interrupt"
//     (https://github.com/apache/curator/issues/600), and CURATOR-205,
//     where the delete after an interrupted acquire was itself interrupted
//     and "no one can acquire the mutex"
//     (https://github.com/apache/curator/issues/726). The suite shows it
//     with a client that crashes while it waits: the session of a client
//     that only gave up lives on, and so does the node.
//   - renewSessionOnly, zk-renew-checks-session-only: Renew asks the server
//     something (proving the session alive) but never whether the lease's
//     node still exists. Twitter commons' DistributedLockImpl, whose
//     holdsLock "will always stay true" after a session timeout
//     (https://github.com/twitter-archive/commons/issues/5), and libkv's
//     ZooKeeper lock, whose clients "would continue execution while
//     believing (wrongfully) that they still hold the lock"
//     (https://github.com/docker/libkv/pull/156).
type zkFlaws struct {
	noRecheck, leaveOnCancel, renewSessionOnly bool
}

// zkRecipe is the Factory of zkRecipeLock with the given flaws on minizk in
// manual time, set up as backends.ZKLock (sessions of an hour, that
// end only at the end of the run; clients from ConnectManual, which send
// no pings of wall time and redial at once).
func zkRecipe(f zkFlaws) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		z, err := zkfake.Start(zkfake.ManualTime(zkEpoch), zkfake.ForceMinizk(), zkfake.TickTime(zkSession/20))
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the ZooKeeper fake", z)
		// Every lease ends, and with it its goroutine; the sessions do not
		// (see backends.ZKLock).
		env.Cleanup(func() { z.Advance(zkSession / 2) }) // every lease ends, and with it its goroutine
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				o, err := locks.Resolve("", append(z.LockOptions(), opts...)...)
				if err != nil {
					return nil, err
				}
				conn, err := z.ConnectManual(z.Addr(), zkSession, nil)
				if err != nil {
					return nil, err
				}
				return &zkRecipeLock{conn: conn, name: name, dir: o.Prefix + "/" + name, opt: o, flaws: f}, nil
			},
			Clock:     z.Clock(),
			Advance:   z.Advance,
			InProcess: true, // ConnectManual to the server's own address: in memory
		}, nil
	}
}

// zkEpoch is where the ZooKeeper mutants' manual clock starts; zkSession is
// their sessions' timeout.
var zkEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const zkSession = time.Hour

// zkRecipeLock is zklock's recipe, cut down: an ephemeral sequential node
// per attempt under the lock's node, the lowest holds, a waiter watches its
// predecessor alone, the token is the node's czxid, and a lease that ends
// but by Unlock deletes its node. Every request passes locks.GateRequest
// as "zk <op>", as zklock's do. No protected names and no retries: the
// mutants run without network faults.
type zkRecipeLock struct {
	conn  *zk.Conn
	name  string
	dir   string // the lock's node
	opt   locks.Options
	flaws zkFlaws
}

// req sends one request, f, through ctx's gate.
func (l *zkRecipeLock) req(ctx context.Context, op string, f func() error) error {
	done := locks.GateRequest(ctx, "zk "+op)
	defer done()
	if err := ctx.Err(); err != nil {
		return err
	}
	return f()
}

// ensureDir creates the lock's node and its parents where missing.
func (l *zkRecipeLock) ensureDir(ctx context.Context) error {
	p := ""
	for _, seg := range strings.Split(strings.TrimPrefix(l.dir, "/"), "/") {
		p += "/" + seg
		err := l.req(ctx, "create", func() error {
			_, err := l.conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// queue lists the contenders, lowest sequence first.
func (l *zkRecipeLock) queue(ctx context.Context) ([]string, error) {
	var kids []string
	err := l.req(ctx, "getChildren", func() (err error) {
		kids, _, err = l.conn.Children(l.dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	slices.SortFunc(kids, func(a, b string) int { return strings.Compare(zkSeq(a), zkSeq(b)) })
	return kids, err
}

// zkSeq is the sequence number the server appended (10 digits).
func zkSeq(name string) string { return name[max(0, len(name)-10):] }

// create queues a node of the caller's.
func (l *zkRecipeLock) create(ctx context.Context) (string, error) {
	if err := l.ensureDir(ctx); err != nil {
		return "", fmt.Errorf("mutant: %w", err)
	}
	var p string
	err := l.req(ctx, "create", func() (err error) {
		p, err = l.conn.Create(l.dir+"/lock-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("mutant: create: %w", err)
	}
	return p[len(l.dir)+1:], nil
}

// drop deletes node, on a context of its own.
func (l *zkRecipeLock) drop(node string) {
	_ = l.req(context.Background(), "delete", func() error { return l.conn.Delete(l.dir+"/"+node, -1) })
}

// TryLock gives up if anybody is queued, else queues and checks it is
// first, deleting its node if not.
func (l *zkRecipeLock) TryLock(ctx context.Context) (locks.Lease, error) {
	kids, err := l.queue(ctx)
	switch {
	case err != nil:
		return nil, fmt.Errorf("mutant: %w", err)
	case len(kids) > 0:
		return nil, fmt.Errorf("mutant: %w", locks.ErrLocked)
	}
	node, err := l.create(ctx)
	if err != nil {
		return nil, err
	}
	kids, err = l.queue(ctx)
	if err == nil && (len(kids) == 0 || kids[0] != node) {
		err = fmt.Errorf("mutant: %w", locks.ErrLocked)
	}
	if err != nil {
		l.drop(node)
		return nil, err
	}
	return l.grant(ctx, node)
}

// Lock queues, then waits on its predecessor's node until it is first.
func (l *zkRecipeLock) Lock(ctx context.Context) (locks.Lease, error) {
	node, err := l.create(ctx)
	if err != nil {
		return nil, err
	}
	giveUp := func(err error) (locks.Lease, error) {
		if !l.flaws.leaveOnCancel {
			l.drop(node)
		}
		return nil, fmt.Errorf("mutant: lock: %w", err)
	}
	for {
		kids, err := l.queue(ctx)
		if err != nil {
			return giveUp(err)
		}
		i := slices.Index(kids, node)
		switch {
		case i < 0:
			return giveUp(errors.New("node gone"))
		case i == 0:
			return l.grant(ctx, node)
		}
		var ch <-chan zk.Event
		var ok bool
		err = l.req(ctx, "exists", func() (err error) {
			ok, _, ch, err = l.conn.ExistsW(l.dir + "/" + kids[i-1])
			return err
		})
		if err != nil {
			return giveUp(err)
		}
		if !ok {
			continue
		}
		select {
		case ev := <-ch:
			if ev.Type == zk.EventNodeDeleted && l.flaws.noRecheck {
				return l.grant(ctx, node) // the flaw: the holder may still be ahead
			}
		case <-ctx.Done():
			return giveUp(ctx.Err())
		}
	}
}

// grant reads the node for its czxid (the token) and proof of the session;
// the lease starts when that read was sent.
func (l *zkRecipeLock) grant(ctx context.Context, node string) (locks.Lease, error) {
	start := l.opt.Clock.Now()
	var st *zk.Stat
	var ok bool
	err := l.req(ctx, "exists", func() (err error) {
		ok, st, err = l.conn.Exists(l.dir + "/" + node)
		return err
	})
	if err == nil && !ok {
		err = errors.New("node gone")
	}
	if err != nil {
		l.drop(node)
		return nil, fmt.Errorf("mutant: read the node: %w", err)
	}
	ops := &zkRecipeOps{l: l, node: node, czxid: st.Czxid, session: st.EphemeralOwner}
	lease := locks.NewLease(locks.LeaseSpec{Name: l.name, Token: locks.Token(st.Czxid), Fenced: true, Start: start}, ops, l.opt)
	go func() {
		<-lease.Done()
		if errors.Is(lease.Err(), locks.ErrReleased) {
			// Unlock closes Done before its delete, which may never be
			// sent (its caller gave up): left to expire by the TTL.
			t := l.opt.Clock.NewTimer(lease.Deadline().Sub(l.opt.Clock.Now()))
			defer t.Stop()
			<-t.C()
			if ops.deleted.Load() {
				return
			}
		}
		l.drop(node) // a lease that ran out gives the lock up
	}()
	locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: l.name, Token: locks.Token(st.Czxid), Fenced: true})
	return lease, nil
}

// zkRecipeOps are one acquisition's renewal and release.
type zkRecipeOps struct {
	l       *zkRecipeLock
	node    string
	czxid   int64
	session int64
	mu      sync.Mutex
	deleted atomic.Bool // Release deleted the node
}

// Renew proves the session alive and (without the flaw) the node its own.
func (o *zkRecipeOps) Renew(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	path := o.l.dir + "/" + o.node
	if o.l.flaws.renewSessionOnly {
		path = o.l.dir // the flaw: any answer proves the session, none the node
	}
	var st *zk.Stat
	var ok bool
	err := o.l.req(ctx, "exists", func() (err error) {
		ok, st, err = o.l.conn.Exists(path)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("mutant: renew: %w", err)
	case o.l.conn.SessionID() != o.session:
		return fmt.Errorf("mutant: session lost: %w", locks.ErrNotHeld)
	case o.l.flaws.renewSessionOnly:
		return nil
	case !ok || st.Czxid != o.czxid:
		return fmt.Errorf("mutant: node gone: %w", locks.ErrNotHeld)
	}
	return nil
}

// Release deletes the node; if it cannot, the node is deleted at the
// lease's deadline.
func (o *zkRecipeOps) Release(ctx context.Context) error {
	err := o.l.req(ctx, "delete", func() error { return o.l.conn.Delete(o.l.dir+"/"+o.node, -1) })
	if err == nil {
		o.deleted.Store(true)
	}
	if errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("mutant: node gone: %w", locks.ErrNotHeld)
	}
	return err
}
