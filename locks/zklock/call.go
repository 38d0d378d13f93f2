package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/locks"
)

// errGaveUp marks the error of a request whose reply do stopped waiting
// for: it may still be applied.
var errGaveUp = errors.New("gave up waiting for the reply")

// do sends one ZooKeeper request, f, on behalf of the operation whose
// context is ctx; with bounded it is bounded by the request timeout as
// well. Under a Gate (see locks.GateRequest; go-zookeeper has no hook, so
// the lock gates its own requests) the request first passes it as
// "zk <op>", and the bound is locks.RequestContext's, which does not count
// the time held at the Gate. Without one, the bound is a wall-clock timer
// (from a pool), and none at all when ctx's own deadline comes first.
//
// go-zookeeper's calls take no context. f runs in a goroutine of its own
// (on the caller's when there is no bound and ctx cannot end: an unbounded
// request, the create, on a ctx without a Done channel); when ctx or the
// bound ends first, do returns at once with an error
// wrapping the context's error (context.DeadlineExceeded for the bound)
// and errGaveUp, and f finishes in the background: the connection answers
// or fails every request in bounded time (a request sent on a connection
// that dies fails with zk.ErrConnectionClosed once the connection is found
// dead, one queued while no server can be reached with zk.ErrNoServer at
// each round of dialling, and all of them with zk.ErrClosing when the
// connection is closed), so the goroutine ends too. late, when not nil, is
// then called with f's result from that goroutine: the create of a node
// nobody waits for any more deletes the node that way. Gate's done is
// called when do returns. Callers read what f wrote only when do returns
// nil: after an error f may still be writing it.
func (l *Locker) do(ctx context.Context, op string, bounded bool, f func() error, late func(error)) error {
	var bound <-chan time.Time
	if locks.GateOf(ctx) != nil {
		if bounded {
			var cancel context.CancelFunc
			ctx, cancel = locks.RequestContext(ctx, l.opt.RequestTimeout)
			defer cancel()
		}
		done := locks.GateRequest(ctx, "zk "+op)
		defer done()
	} else if bounded {
		if t := requestTimer(ctx, l.opt.RequestTimeout); t != nil {
			defer putTimer(t)
			bound = t.C
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("zk %s: %w", op, err)
	}
	if bound == nil && ctx.Done() == nil {
		return f() // nothing but the reply could end the wait
	}
	c := &call{f: f, late: late, res: make(chan error, 1)}
	go c.run()
	select {
	case err := <-c.res:
		return err
	case <-ctx.Done():
		return c.giveUp(op, ctx.Err())
	case <-bound:
		return c.giveUp(op, context.DeadlineExceeded)
	}
}

// call is one request do runs: f, in a goroutine of its own, whose result
// goes to res unless do gave up on it first, and then to late.
type call struct {
	f     func() error
	late  func(error)
	res   chan error
	state atomic.Int32 // callRunning, then callTaken or callAbandoned
}

const (
	callRunning = iota
	callTaken
	callAbandoned
)

func (c *call) run() {
	err := c.f()
	if c.state.CompareAndSwap(callRunning, callTaken) {
		c.res <- err
		return
	}
	if c.late != nil {
		c.late(err)
	}
}

// giveUp abandons the call for why, unless it finished just now: then its
// result.
func (c *call) giveUp(op string, why error) error {
	if c.state.CompareAndSwap(callRunning, callAbandoned) {
		return fmt.Errorf("zk %s: %w (%w)", op, why, errGaveUp)
	}
	return <-c.res
}

// timers holds stopped wall-clock timers for requestTimer.
var timers sync.Pool

// requestTimer returns a running timer of d, or nil when ctx's deadline
// comes no later: ctx bounds the request then. Give it back with putTimer.
func requestTimer(ctx context.Context, d time.Duration) *time.Timer {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return nil
	}
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// putTimer stops t and keeps it for reuse: a stopped timer sends nothing
// afterwards, even if it had fired, so the next Reset starts clean.
func putTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

// children lists the lock node's children.
func (l *Locker) children(ctx context.Context) ([]string, error) {
	kids, _, _, err := l.childrenStat(ctx, false)
	return kids, err
}

// childrenStat lists the lock node's children and returns the lock node's
// Stat read with them (one getChildren2 request) and, with watch, a watch
// on its children, which fires at the next change to them (a child
// created or deleted) or when the watch is lost.
func (l *Locker) childrenStat(ctx context.Context, watch bool) ([]string, *zk.Stat, <-chan zk.Event, error) {
	var (
		kids []string
		st   *zk.Stat
		ch   <-chan zk.Event
	)
	err := l.do(ctx, "getChildren", true, func() (err error) {
		if watch {
			kids, st, ch, err = l.conn.ChildrenW(l.path)
		} else {
			kids, st, err = l.conn.Children(l.path)
		}
		return err
	}, nil)
	if err != nil {
		return nil, nil, nil, err // kids, st and ch may still be written by a call given up on
	}
	return kids, st, ch, nil
}

// stat reads a node's Stat; nil when the node does not exist.
func (l *Locker) stat(ctx context.Context, path string) (*zk.Stat, error) {
	var (
		ok bool
		st *zk.Stat
	)
	err := l.do(ctx, "exists", true, func() (err error) {
		ok, st, err = l.conn.Exists(path)
		return err
	}, nil)
	if err != nil || !ok { // st may still be written by a call given up on
		return nil, err
	}
	return st, nil
}

// watch sets a watch on path, which fires when the node is deleted or its
// data changes, or when the watch is lost (session expired, connection
// closed). ok is false, and no watch is set, when the node does not exist:
// the caller looks again. (getData, not exists: exists on a node deleted
// since the listing would leave a watch for its creation, which never
// comes, python-zk/kazoo#490; and a waiter must not sleep on a watch that
// was not set, as ZooKeeper's WriteLock recipe and Helix's copy of it did,
// apache/helix#44.)
func (l *Locker) watch(ctx context.Context, path string) (<-chan zk.Event, *zk.Stat, bool, error) {
	var (
		ch <-chan zk.Event
		st *zk.Stat
	)
	err := l.do(ctx, "getData", true, func() (err error) {
		_, st, ch, err = l.conn.GetW(path)
		return err
	}, nil)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, nil, false, nil
	case err != nil:
		return nil, nil, false, err // ch and st may still be written by a call given up on
	}
	return ch, st, true, nil
}

// ensureParents creates the lock's node and the prefix's nodes above it,
// each where it is missing. The prefix's nodes are persistent; the lock's
// node is a container, which the server deletes some time after its last
// child goes (every lock name would otherwise leave a node behind).
func (l *Locker) ensureParents(ctx context.Context) error {
	for i := 1; i <= len(l.path); i++ {
		if i < len(l.path) && l.path[i] != '/' {
			continue
		}
		p := l.path[:i]
		err := l.do(ctx, "create", true, func() error {
			if p == l.path {
				_, err := l.conn.CreateContainer(p, nil, zk.FlagContainer, l.acl)
				return err
			}
			_, err := l.conn.Create(p, nil, zk.FlagPersistent, l.acl)
			return err
		}, nil)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// transient reports whether a request that failed with err may succeed if
// sent again: the connection was lost or no server could be reached (the
// session may live on), the session moved, the session expired (the
// connection goes on with a new one; callers that had a node in the old
// session deal with its loss first), or the request's own bound ran out
// (callers check their ctx first).
func transient(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrSessionExpired) ||
		errors.Is(err, context.DeadlineExceeded)
}

// pause waits before another try after err: a transient error is retried
// after a pause that grows with *tries, until ctx or the wait budget (nil
// budget: none) ends; anything else is returned as it is.
func (l *Locker) pause(ctx context.Context, err error, tries *int, budget <-chan time.Time) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%w (last error: %w)", ctxErr, err)
	}
	if !transient(err) {
		return err
	}
	*tries++
	t := l.opt.Clock.NewTimer(l.opt.Backoff(*tries))
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-budget:
		return fmt.Errorf("%w after %v (last error: %w)", locks.ErrWaitBudget, l.opt.WaitBudget, err)
	case <-ctx.Done():
		return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
	}
}

// budgetTimer returns a channel that fires when the wait budget of a Lock
// that began at began runs out (nil without a budget) and a function to
// stop it.
func (l *Locker) budgetTimer(began time.Time) (<-chan time.Time, func()) {
	if l.opt.WaitBudget <= 0 {
		return nil, func() {}
	}
	t := l.opt.Clock.NewTimer(l.opt.WaitBudget - l.opt.Clock.Now().Sub(began))
	return t.C(), func() { t.Stop() }
}
