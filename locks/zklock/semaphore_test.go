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

// newSemaphore returns the semaphore "pool" of permits permits on conn
// under the test's prefix, with TTL the session timeout.
func (s *zkServer) newSemaphore(t testing.TB, conn *zk.Conn, permits int, opts ...locks.Option) *Locker {
	t.Helper()
	all := []locks.Option{locks.WithTTL(sessionTimeout), locks.WithPrefix(s.prefix)}
	l, err := NewSemaphore(conn, "pool", permits, append(all, opts...)...)
	if err != nil {
		t.Fatalf("NewSemaphore: %v", err)
	}
	return l
}

func TestNewSemaphoreValidates(t *testing.T) {
	s := server(t)
	conn := s.connect(t)
	locktest.RefusesBadPermits(t, func(n int) error {
		_, err := NewSemaphore(conn, "pool", n)
		return err
	})
	if _, err := NewSemaphore(nil, "pool", 2); !errors.Is(err, locks.ErrNilClient) {
		t.Errorf("nil connection: %v, want ErrNilClient", err)
	}
	l, err := NewSemaphore(conn, "a/b", 2)
	if err != nil {
		t.Fatal(err)
	}
	if l.NodePath() != DefaultSemaphorePrefix+"/a%2Fb" {
		t.Errorf("NodePath %q", l.NodePath())
	}
}

// TestSemaphorePermits: N TryLocks hold, with growing tokens; the N+1st is
// refused and leaves no node; after an Unlock a TryLock holds again, with
// a greater token.
func TestSemaphorePermits(t *testing.T) {
	s := server(t)
	conn := s.connect(t)
	const n = 3
	l := s.newSemaphore(t, conn, n)
	var leases []locks.Lease
	var last locks.Token
	for i := range n {
		lease := locktest.MustTryLock(t, l)
		if tok := locktest.Token(t, lease); tok <= last {
			t.Fatalf("grant %d: token %v not above %v", i, tok, last)
		} else {
			last = tok
		}
		leases = append(leases, lease)
	}
	if _, err := s.newSemaphore(t, s.connect(t), n).TryLock(context.Background()); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock with every permit held: %v, want ErrLocked", err)
	}
	if kids := children(t, conn, l); len(kids) != n {
		t.Fatalf("children %v after a refused TryLock, want the %d holders'", kids, n)
	}
	locktest.UnlockOnce(t, leases[1])
	lease := locktest.MustTryLock(t, l)
	if locktest.Token(t, lease) <= last {
		t.Fatal("token after a release not above the earlier grants'")
	}
	for _, h := range []locks.Lease{leases[0], leases[2], lease} {
		locktest.UnlockOnce(t, h)
	}
	waitChildren(t, conn, l, 0)
}

// TestSemaphoreWaitersInTurn: with both permits held, two waiters queue;
// each release hands a permit to the next waiter in line, and the second
// still waits after the first got its permit.
func TestSemaphoreWaitersInTurn(t *testing.T) {
	s := server(t)
	conn := s.connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := s.newSemaphore(t, conn, 2)
	a, b := locktest.MustTryLock(t, l), locktest.MustTryLock(t, l)
	first := locktest.LockAsync(ctx, s.newSemaphore(t, s.connect(t), 2))
	waitChildren(t, conn, l, 3)
	second := locktest.LockAsync(ctx, s.newSemaphore(t, s.connect(t), 2))
	waitChildren(t, conn, l, 4)

	locktest.WaitersInTurn(t, a, b, first, second)
}

// TestSemaphoreLaterHolderReleasesFirst: with both permits held, the
// holder that came second releases first; the waiter, which has both
// holders ahead of it, gets the freed permit while the first still holds
// (a waiter watching only the contender two places ahead would wait for
// the first holder's release).
func TestSemaphoreLaterHolderReleasesFirst(t *testing.T) {
	s := server(t)
	conn := s.connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := s.newSemaphore(t, conn, 2)
	a, b := locktest.MustTryLock(t, l), locktest.MustTryLock(t, l)
	got := locktest.LockAsync(ctx, s.newSemaphore(t, s.connect(t), 2))
	waitChildren(t, conn, l, 3)
	locktest.UnlockOnce(t, b)
	r := locktest.Receive(t, got)
	if r.Err != nil {
		t.Fatalf("waiter: %v", r.Err)
	}
	if err := a.Renew(ctx); err != nil {
		t.Fatalf("the first holder: %v", err)
	}
	locktest.UnlockOnce(t, a)
	locktest.UnlockOnce(t, r.Lease)
}

// TestSemaphoreSessionExpiry: a holder's session ends on the server; its
// node goes with it, the holder learns it (Done, ErrNotHeld), the waiter
// holds the freed permit with a greater token, and the other holder keeps
// its permit through the stale holder's Unlock.
func TestSemaphoreSessionExpiry(t *testing.T) {
	t.Parallel()
	skipReconnectsUnderRace(t)
	s := server(t)
	d := &faultDialer{}
	conn := s.connectWith(t, connOpts{dialer: d})
	other := s.connect(t)
	old := locktest.MustTryLock(t, s.newSemaphore(t, conn, 2))
	kept := locktest.MustTryLock(t, s.newSemaphore(t, other, 2))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := s.newSemaphore(t, s.connect(t), 2)
	got := locktest.LockAsync(ctx, l)
	waitChildren(t, other, l, 3)

	id, passwd := d.credentials()
	killSession(t, s.addr, id, passwd)
	r := locktest.Receive(t, got)
	if r.Err != nil {
		t.Fatalf("waiter: %v", r.Err)
	}
	if locktest.Token(t, r.Lease) <= locktest.Token(t, kept) {
		t.Fatal("the freed permit's token is not above the others'")
	}
	locktest.LostPermitHarmless(t, old, kept, r.Lease)
}

// TestSemaphoreAtMostN: goroutines of three clients take permits of a
// semaphore of 3: never more than 3 inside at once.
func TestSemaphoreAtMostN(t *testing.T) {
	s := server(t)
	var lockers []locks.Locker
	for range 3 {
		lockers = append(lockers, s.newSemaphore(t, s.connect(t), 3))
	}
	t.Logf("at most %d holders at once", locktest.AtMostPermits(t, 3, lockers, 3, 8, time.Millisecond))
}
