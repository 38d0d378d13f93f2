package zklock

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/locks"
)

// A node the Locker no longer wants (a waiter that gave up, a refused
// TryLock, a lease that ended, a create cut off) is ephemeral: it goes with
// its session, and not before. A session outlives a lost connection
// (go-zookeeper reconnects with it), so a clean-up delete that was lost with
// the connection, or whose reply came after the request timeout, must be
// sent again, or the node stays ahead of every later contender for as long
// as the process lives, held by a client that no longer believes it holds
// anything. discard and sweep do that.

// deleteNode deletes one of the Locker's own nodes, whatever its version
// (its GUID makes the path the Locker's alone): see discard.
func (l *Locker) deleteNode(path string) {
	l.discard("delete", func() error { return l.conn.Delete(path, -1) })
}

// discardUnknown deletes c's node if a create whose outcome is unknown
// made it: it looks the node up among the lock's children by c's GUID
// (see discard).
func (l *Locker) discardUnknown(c *contender) {
	l.discard("getChildren", func() error {
		kids, _, err := l.conn.Children(l.path)
		if err != nil {
			return err // ErrNoNode: no lock node, so no node of c's
		}
		for _, k := range kids {
			if c.mine(k) {
				return l.conn.Delete(l.path+"/"+k, -1)
			}
		}
		return nil
	})
}

// discard runs try, a clean-up that deletes a node of the Locker's, until
// its outcome settles the node's fate (settled). The first try is bounded
// by the request timeout, so that the caller (a Lock that gives up, a
// refused TryLock) mostly returns with the node gone; its caller's context
// is not used, as the clean-up must outlive it, so the try passes no Gate.
// If that try does not settle it (its reply did not come within the
// request timeout, or the connection was lost), a goroutine goes on: sweep.
func (l *Locker) discard(op string, try func() error) {
	ctx, cancel := locks.RequestContext(context.Background(), l.opt.RequestTimeout)
	defer cancel()
	err := l.do(ctx, op, false, try, func(err error) {
		if !l.settled(err) {
			l.sweep(try) // already on a goroutine of its own (see do)
		}
	})
	gaveUp := errors.Is(err, errGaveUp) // the late function above takes over
	if !gaveUp && l.settled(err) {
		return
	}
	if !gaveUp {
		go l.sweep(try)
	}
	l.opt.Logger.Debug("lockproof: a clean-up of a contender's node did not settle; it goes on in the background",
		"lock", l.name, "err", err)
}

// settled reports whether a clean-up that ended with err leaves the node
// gone, or beyond the Locker's reach: it was deleted, or was not there, or
// its session is over (expired, or closed with the connection). A lost
// connection, no reachable server, a session moved to another connection
// or a reply not waited for settle nothing. Any other error (the server
// refused the request) is logged and settles the node as far as the
// Locker can: it goes with the session.
func (l *Locker) settled(err error) bool {
	switch {
	case err == nil, errors.Is(err, zk.ErrNoNode), sessionOver(err):
		return true
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer),
		errors.Is(err, zk.ErrSessionMoved), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	l.opt.Logger.Warn("lockproof: could not clean up a contender's node; it goes with the session",
		"lock", l.name, "err", err)
	return true
}

// sweepClosed is how many tries in a row sweep sees fail with the
// connection closed and disconnected before it takes the connection for
// closed by its owner.
const sweepClosed = 3

// Pauses between sweep's tries, in wall time (see sweep).
const (
	sweepPauseMin    = 20 * time.Millisecond  // before the second try
	sweepPauseMax    = 100 * time.Millisecond // the longest, however many tries failed
	sweepPauseClosed = 5 * time.Millisecond   // after a try that looked closed
)

// sweepPause is how long sweep waits before its next try, after tries
// tries of which the last looked like a connection closed by its owner
// (closedLike). The pause grows from sweepPauseMin to sweepPauseMax; after
// a try that looked closed it is sweepPauseClosed, so that a connection
// its owner closed ends the sweep within sweepPauseMax plus sweepClosed
// short pauses, well before a test's goroutine-leak check gives up on it.
func sweepPause(tries int, closedLike bool) time.Duration {
	if closedLike {
		return sweepPauseClosed
	}
	return min(sweepPauseMin<<min(tries-1, 3), sweepPauseMax)
}

// sweep tries again until the clean-up settles. It needs no timer to wait
// for the connection: go-zookeeper holds a request sent while it
// reconnects until it has a connection again (failing it with
// zk.ErrNoServer after each round of dialling, which it paces a second
// apart), so each try waits for the reconnection. The first try goes at
// once: mostly the connection has just been lost, and the try then
// follows the reconnection on its own, with no timer between them, so
// that a test's scheduler that waits for every goroutine to block sees
// them through together (a pause here made the property suite's replays
// of a seed on minizk differ: the try landed before one operation of the
// next step in one replay and after it in another). Between later tries it
// pauses a little of wall time (sweepPause), as go-zookeeper's reconnection
// runs on the wall clock, which the Locker's (a manual clock in tests)
// does not follow: a pause on the Locker's clock could outlast the
// connection for good. The pause only keeps a try that fails at once from
// spinning, so it stays short. A pause without jitter: sweep draws nothing
// from the Locker's random source, which the operations' retries use.
//
// A connection closed by its owner fails every request at once with
// zk.ErrConnectionClosed and stays disconnected; one that was lost fails
// the requests it had sent with the same error, but is disconnected only
// for the moment before it dials again, and holds later requests until it
// has reconnected. sweepClosed such tries in a row, a short pause apart,
// end the sweep (the session closes with the connection, or the server
// expires it). The Locker has no Close; the sweep ends with the
// connection its owner closes, and soon after it.
func (l *Locker) sweep(try func() error) {
	var pause time.Duration
	for tries, closed := 1, 0; closed < sweepClosed; tries++ {
		if pause > 0 {
			time.Sleep(pause)
		}
		before := l.conn.State()
		err := try()
		if l.settled(err) {
			return
		}
		closed = closedCount(before, l.conn.State(), err, closed)
		pause = sweepPause(tries, closed > 0)
	}
}

// closedCount returns closed+1 if a try failed as on a connection its
// owner closed, else 0: with zk.ErrConnectionClosed, the connection
// disconnected both when the try was sent (before) and when it failed
// (after). A lost connection is disconnected only for the moment it fails
// the requests it had sent, so a try sent with the session alive does not
// count, or a connection that keeps dropping would pass for closed.
func closedCount(before, after zk.State, err error, closed int) int {
	if errors.Is(err, zk.ErrConnectionClosed) && before == zk.StateDisconnected && after == zk.StateDisconnected {
		return closed + 1
	}
	return 0
}
