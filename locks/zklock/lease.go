package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/locks"
)

// leaseOps are the owner-checked operations on one acquisition: its node,
// known by path and czxid, in its session.
type leaseOps struct {
	l       *Locker
	path    string
	token   int64 // the lease's token: the node's czxid, or a pzxid at least that (see grant)
	version int32
	session int64
	watch   <-chan zk.Event // a watch on the node set before the grant, for the monitor; nil: none

	mu       sync.Mutex
	czxid    int64       // the node's czxid; 0 until a read of the node told it
	lost     error       // why the monitor found the acquisition lost; nil until then
	released bool        // Release saw the node deleted (or gone)
	backstop locks.Timer // after Unlock, deletes the node at the deadline unless released
}

// owns reports whether st, read at the acquisition's path, is the
// acquisition's node: owned by its session, with its czxid. A czxid not
// known yet (the token was the lock node's pzxid) is learnt from st, which
// must not be above the token: the node's create changed the lock node's
// children, so the pzxid the token was read from is at least its czxid.
func (o *leaseOps) owns(st *zk.Stat) bool {
	if st == nil || st.EphemeralOwner != o.session {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.czxid == 0 && st.Czxid <= o.token {
		o.czxid = st.Czxid
	}
	return st.Czxid == o.czxid
}

// markReleased records that the node is gone by Release, and stops the
// backstop.
func (o *leaseOps) markReleased() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.released = true
	if o.backstop != nil {
		o.backstop.Stop()
	}
}

// armBackstop makes sure, after Unlock, that the node goes by the lease's
// deadline: unless Release has deleted it by then, a timer deletes it.
func (o *leaseOps) armBackstop(deadline time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.released {
		return
	}
	o.backstop = o.l.opt.Clock.AfterFunc(max(deadline.Sub(o.l.opt.Clock.Now()), 0), func() {
		o.mu.Lock()
		released := o.released
		o.mu.Unlock()
		if !released {
			o.l.deleteNode(o.path)
		}
	})
}

var _ locks.LeaseOps = (*leaseOps)(nil)

func (o *leaseOps) setLost(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lost == nil {
		o.lost = err
	}
}

func (o *leaseOps) lostErr() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lost
}

// sessionErr returns an error wrapping ErrSessionLost and locks.ErrNotHeld
// once the connection no longer has the acquisition's session:
// go-zookeeper replaces an expired session with a new one, which owns none
// of the old one's nodes.
func (o *leaseOps) sessionErr() error {
	if o.l.conn.SessionID() != o.session {
		return o.sessionLost()
	}
	return nil
}

// sessionOver reports whether a request or a watch failed with err because
// its session is over: expired, or closed with the connection. The
// session's ephemeral nodes went with it, and no retry on the connection
// brings them back.
func sessionOver(err error) bool {
	return errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing)
}

func (o *leaseOps) sessionLost() error {
	return fmt.Errorf("%w (session %x): %w", ErrSessionLost, o.session, locks.ErrNotHeld)
}

func (o *leaseOps) nodeGone() error {
	return fmt.Errorf("zklock: node %s is gone: %w", o.path, locks.ErrNotHeld)
}

// Renew proves the session alive and the node still this acquisition's,
// in one round trip (exists): the node must exist with the acquisition's
// czxid and be owned by the session, and the connection must still have
// that session. The server heard from the session when it answered, so it
// will not expire it before the TTL has passed from the moment the request
// was sent, where ManagedLease moves the deadline from. (go-zookeeper's
// own pings keep the session alive too, but the lock cannot see them.)
func (o *leaseOps) Renew(ctx context.Context) error {
	if err := o.lostErr(); err != nil {
		return err
	}
	if err := o.sessionErr(); err != nil {
		return err
	}
	st, err := o.l.stat(ctx, o.path)
	switch {
	case sessionOver(err):
		return o.sessionLost()
	case err != nil:
		return fmt.Errorf("zklock: %w", err)
	}
	if err := o.sessionErr(); err != nil {
		return err
	}
	if !o.owns(st) {
		return o.nodeGone()
	}
	return nil
}

// Release deletes the node, version-checked. Should someone have changed
// the node's data (its version moved), it is read again and deleted at
// its new version while it still has the acquisition's czxid. A session
// that is over (expired, closed, or replaced on the connection) took the
// node with it: Release then returns at once. Transient failures are
// retried while ctx lasts, for at most one TTL.
func (o *leaseOps) Release(ctx context.Context) error {
	if err := o.sessionErr(); err != nil {
		o.markReleased() // the node went with its session
		return err
	}
	start := o.l.opt.Clock.Now()
	version := o.version
	for tries := 0; ; {
		err := o.l.do(ctx, "delete", true, func() error { return o.l.conn.Delete(o.path, version) }, nil)
		switch {
		case err == nil:
			o.markReleased()
			return nil
		case errors.Is(err, zk.ErrNoNode):
			o.markReleased()
			return o.nodeGone()
		case sessionOver(err), o.sessionErr() != nil:
			// The session is over, and its ephemeral node with it;
			// retrying would wait for a connection that no longer owns it.
			o.markReleased()
			return o.sessionLost()
		case errors.Is(err, zk.ErrBadVersion):
			var st *zk.Stat
			if st, err = o.l.stat(ctx, o.path); err == nil {
				if !o.owns(st) {
					o.markReleased()
					return o.nodeGone()
				}
				version = st.Version
				continue
			}
		}
		if o.l.opt.Clock.Now().Sub(start) >= o.l.opt.TTL {
			return fmt.Errorf("zklock: delete %s: %w", o.path, err)
		}
		if perr := o.l.pause(ctx, err, &tries, nil); perr != nil {
			return fmt.Errorf("zklock: delete %s: %w", o.path, perr)
		}
	}
}

// monitor watches the node for as long as the lease lives and ends the
// lease as soon as the node is deleted (by someone else: Unlock closes
// Done first) or the session is found expired or closed, without waiting
// for the watchdog's next renewal. Once Done has closed for any reason but
// Unlock (the lease expired locally, or was lost), it deletes the node if
// it is still there: a lease the client no longer trusts must not keep the
// lock from the others for as long as the connection lives. After Unlock
// it ends, leaving a timer (armBackstop) that deletes the node at the
// lease's deadline unless Unlock's Release did by then (an Unlock whose
// ctx had ended sends none, one that failed left the node): the node is ephemeral, and would
// otherwise outlive the lease for as long as the session does. That delete
// is sent again until it settles (see discard): one lost with the
// connection would leave the node for as long as the session lives.
//
// Its first watch is the one set before the grant (o.watch): on the node,
// or, when the granting listing found the node alone, on the lock node's
// children, which fires at their next change (the node's own deletion
// among them); after any event but the node's deletion or the session's
// end, it reads the node with a watch again.
func (o *leaseOps) monitor(lease *locks.ManagedLease) {
	go func() {
		if err := o.watchNode(lease); err != nil {
			o.setLost(err)
			_ = lease.Renew(context.Background()) // fails with ErrNotHeld, which ends the lease
		}
		<-lease.Done()
		if errors.Is(lease.Err(), locks.ErrReleased) {
			o.armBackstop(lease.Deadline())
			return
		}
		o.l.deleteNode(o.path)
	}()
}

// watchNode returns why the lease is lost, or nil once Done has closed.
func (o *leaseOps) watchNode(lease *locks.ManagedLease) error {
	var ctx context.Context // the requests': made at the first, cancelled once Done closes
	for tries, closed := 0, 0; ; {
		if err := o.sessionErr(); err != nil {
			return err
		}
		var (
			ch     <-chan zk.Event
			st     *zk.Stat
			ok     bool
			err    error
			before = o.l.conn.State()
		)
		if ch = o.watch; ch != nil {
			o.watch, ok = nil, true // set before the grant, which checked the node it read
		} else {
			if ctx == nil {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(context.Background())
				defer cancel()
				go func() {
					select {
					case <-lease.Done():
						cancel()
					case <-ctx.Done():
					}
				}()
			}
			ch, st, ok, err = o.l.watch(ctx, o.path)
		}
		switch {
		case lease.Err() != nil:
			return nil
		case err == nil && st != nil && !o.owns(st), err == nil && !ok:
			return o.nodeGone()
		case sessionOver(err):
			return o.sessionLost()
		case err != nil:
			// The watchdog decides whether the lease survives an
			// unreachable server; watch again a little later. A
			// connection its owner closed (its session closed with it)
			// fails every request at once, and stays disconnected.
			if closed = closedCount(before, o.l.conn.State(), err, closed); closed >= sweepClosed {
				return o.sessionLost()
			}
			if o.l.pause(ctx, err, &tries, nil) != nil {
				return nil
			}
			continue
		}
		tries, closed = 0, 0
		select {
		case ev := <-ch:
			switch {
			case lease.Err() != nil:
				return nil
			case ev.Type == zk.EventNodeDeleted:
				return o.nodeGone()
			case ev.Type == zk.EventNotWatching && sessionOver(ev.Err):
				return o.sessionLost()
			}
			// The data changed, or the watch was lost another way: watch again.
		case <-lease.Done():
			return nil
		}
	}
}
