package zklock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// handedOff is a mutex held after a wait: holder had the lock, the waiter
// (its own connection, conn) queued behind it and was granted once holder
// unlocked. l is the waiter's Locker, other a third connection.
type handedOff struct {
	s           *zkServer
	conn, other *zk.Conn
	l           *Locker
	lease       locks.Lease
	before      locks.Token // the earlier holder's token
}

func handOff(t *testing.T, name string) handedOff {
	t.Helper()
	s := server(t)
	h := handedOff{s: s, conn: s.connect(t), other: s.connect(t)}
	h.l = s.newLocker(t, h.conn, name, locks.WithWatchdog(false))
	holder := locktest.MustLock(t, s.newLocker(t, h.other, name))
	h.before = locktest.Token(t, holder)
	res := locktest.LockAsync(context.Background(), h.l)
	waitChildren(t, h.other, h.l, 2)
	locktest.UnlockOnce(t, holder)
	r := locktest.Receive(t, res)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	h.lease = r.Lease
	return h
}

// TestWaitedTokenIsTheGrantingPzxid: a mutex's holder granted after a wait
// takes the pzxid of the listing that granted it, whether its node is the
// one its create made or one adopted by its GUID. Here b queued behind a,
// so b's czxid is below a's token (a's listing came after the deletion of
// the first holder's node, made after b's): a czxid token would go
// backwards. b's token is above a's, and is the lock node's pzxid.
func TestWaitedTokenIsTheGrantingPzxid(t *testing.T) {
	for _, adopted := range []bool{false, true} {
		t.Run(map[bool]string{false: "created", true: "adopted"}[adopted], func(t *testing.T) {
			s := server(t)
			conn := s.connect(t)
			first := locktest.MustLock(t, s.newLocker(t, s.connect(t), "waited"))
			a := s.newLocker(t, s.connect(t), "waited")
			resA := locktest.LockAsync(context.Background(), a)
			waitChildren(t, conn, a, 2)
			b := s.newLocker(t, conn, "waited", locks.WithWatchdog(false))
			ctx := context.Background()
			c, err := b.enqueue(ctx, newContender(b), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if adopted { // as recoverNode leaves it: its owner not known from a create's reply
				c.set(b, c.name, c.session, false)
			}
			resB := make(chan locktest.Result, 1)
			go func() {
				lease, err := b.waitTurn(ctx, c, time.Now())
				resB <- locktest.Result{Lease: lease, Err: err}
			}()
			locktest.UnlockOnce(t, first)
			ra := locktest.Receive(t, resA)
			if ra.Err != nil {
				t.Fatal(ra.Err)
			}
			tokA := locktest.Token(t, ra.Lease)
			_, node, err := conn.Get(c.path)
			if err != nil {
				t.Fatal(err)
			}
			if locks.Token(node.Czxid) >= tokA {
				t.Fatalf("b's czxid %d not below a's token %v: the case is not the one meant", node.Czxid, tokA)
			}
			locktest.UnlockOnce(t, ra.Lease)
			rb := locktest.Receive(t, resB)
			if rb.Err != nil {
				t.Fatal(rb.Err)
			}
			_, parent, err := conn.Exists(b.NodePath())
			if err != nil {
				t.Fatal(err)
			}
			tokB := locktest.Token(t, rb.Lease)
			if tokB <= tokA || tokB != locks.Token(parent.Pzxid) {
				t.Fatalf("b's token %v; want the lock node's pzxid %d, above a's token %v", tokB, parent.Pzxid, tokA)
			}
			if err := rb.Lease.Renew(ctx); err != nil { // the lease learns its czxid, below the token
				t.Fatalf("Renew: %v", err)
			}
			locktest.UnlockOnce(t, rb.Lease)
		})
	}
}

// TestWaitedHolderTokenAboveTheEarlier: the token of a mutex's holder
// granted after a wait is above its predecessor's, and the next one's
// above its own.
func TestWaitedHolderTokenAboveTheEarlier(t *testing.T) {
	h := handOff(t, "above")
	tok := locktest.Token(t, h.lease)
	if tok <= h.before {
		t.Fatalf("token %v after the earlier holder's %v", tok, h.before)
	}
	locktest.UnlockOnce(t, h.lease)
	next := locktest.MustLock(t, h.s.newLocker(t, h.other, "above"))
	if got := locktest.Token(t, next); got <= tok {
		t.Fatalf("the next holder's token %v, not above %v", got, tok)
	}
	locktest.UnlockOnce(t, next)
}

// TestWaitedHolderLeaseWatches: the lease of a mutex's holder granted
// after a wait watches its node through the lock node's children (the
// watch the granting listing set) and, from their first change, through
// its node: Done closes at once when someone else deletes the node, with
// or without a newcomer first, and when the connection is closed; a
// newcomer alone does not end it.
func TestWaitedHolderLeaseWatches(t *testing.T) {
	deleteNode := func(t *testing.T, h handedOff) {
		kids := children(t, h.other, h.l)
		for _, k := range kids {
			if _, st, err := h.other.Get(h.l.NodePath() + "/" + k); err == nil && st.EphemeralOwner == h.conn.SessionID() {
				if err := h.other.Delete(h.l.NodePath()+"/"+k, -1); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		t.Fatalf("no node of the holder's among %q", kids)
	}
	t.Run("deleted", func(t *testing.T) {
		h := handOff(t, "deleted")
		deleteNode(t, h)
		locktest.Closed(t, "Done after the node was deleted", h.lease.Done())
		if err := h.lease.Err(); !errors.Is(err, locks.ErrNotHeld) {
			t.Fatalf("Err = %v, want ErrNotHeld", err)
		}
	})
	t.Run("newcomer then deleted", func(t *testing.T) {
		h := handOff(t, "newcomer")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		res := locktest.LockAsync(ctx, h.s.newLocker(t, h.other, "newcomer"))
		waitChildren(t, h.other, h.l, 2)
		if err := h.lease.Renew(ctx); err != nil {
			t.Fatalf("Renew after a newcomer queued: %v", err)
		}
		if err := h.lease.Err(); err != nil {
			t.Fatalf("the lease ended when a newcomer queued: %v", err)
		}
		deleteNode(t, h)
		locktest.Closed(t, "Done after the node was deleted", h.lease.Done())
		if err := h.lease.Err(); !errors.Is(err, locks.ErrNotHeld) {
			t.Fatalf("Err = %v, want ErrNotHeld", err)
		}
		r := locktest.Receive(t, res)
		if r.Err != nil {
			t.Fatalf("newcomer: %v", r.Err)
		}
		locktest.UnlockOnce(t, r.Lease)
	})
	t.Run("connection closed", func(t *testing.T) {
		h := handOff(t, "closed")
		h.conn.Close()
		locktest.Closed(t, "Done after the connection was closed", h.lease.Done())
		if err := h.lease.Err(); !errors.Is(err, ErrSessionLost) || !errors.Is(err, locks.ErrNotHeld) {
			t.Fatalf("Err = %v, want ErrSessionLost and ErrNotHeld", err)
		}
	})
}
