package etcdlock

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

func newSemaphore(t testing.TB, s *etcdfake.Server, permits int, opts ...locks.Option) *Locker {
	t.Helper()
	l, err := NewSemaphore(s.Client(), "pool", permits, append(s.LockOptions(), opts...)...)
	if err != nil {
		t.Fatalf("NewSemaphore: %v", err)
	}
	return l
}

func TestNewSemaphoreValidates(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	for _, n := range []int{0, -1} {
		if _, err := NewSemaphore(s.Client(), "pool", n); !errors.Is(err, locks.ErrInvalidOption) {
			t.Errorf("%d permits: %v, want ErrInvalidOption", n, err)
		}
	}
	if _, err := NewSemaphore(nil, "pool", 2); !errors.Is(err, locks.ErrNilClient) {
		t.Errorf("nil client: %v, want ErrNilClient", err)
	}
	l, err := NewSemaphore(s.Client(), "a/b", 2)
	if err != nil {
		t.Fatal(err)
	}
	if l.Key() != DefaultSemaphorePrefix+"a%2Fb/" {
		t.Errorf("Key %q", l.Key())
	}
}

// TestSemaphorePermits: N TryLocks hold, with growing tokens; the N+1st is
// refused and leaves no key; after an Unlock a TryLock holds again.
func TestSemaphorePermits(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	const n = 3
	l := newSemaphore(t, s, n)
	var leases []locks.Lease
	var last locks.Token
	for i := range n {
		lease := locktest.MustTryLock(t, l)
		if tok := token(t, lease); tok <= last {
			t.Fatalf("grant %d: token %v not above %v", i, tok, last)
		} else {
			last = tok
		}
		leases = append(leases, lease)
	}
	if _, err := newSemaphore(t, s, n).TryLock(context.Background()); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock with every permit held: %v, want ErrLocked", err)
	}
	if kvs, _ := contenders(t, s.Client(), l); len(kvs) != n {
		t.Fatalf("%d keys after a refused TryLock, want %d", len(kvs), n)
	}
	locktest.UnlockOnce(t, leases[0])
	lease := locktest.MustTryLock(t, l)
	if token(t, lease) <= last {
		t.Fatal("token after a release not above the earlier grants'")
	}
	for _, h := range append(leases[1:], lease) {
		locktest.UnlockOnce(t, h)
	}
}

// TestSemaphoreWaitersInTurn: with both permits held, two waiters queue;
// each release wakes the next waiter only, and the second waiter still
// waits after the first got its permit.
func TestSemaphoreWaitersInTurn(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx := context.Background()
	l := newSemaphore(t, s, 2)
	a, b := locktest.MustTryLock(t, l), locktest.MustTryLock(t, l)
	first := locktest.LockAsync(ctx, l)
	waitContenders(t, s.Client(), l, 3)
	second := locktest.LockAsync(ctx, l)
	waitContenders(t, s.Client(), l, 4)

	locktest.WaitersInTurn(t, a, b, first, second)
}

// TestSemaphoreLaterHolderReleasesFirst: with both permits held, the
// holder that came second releases first; the waiter, which has both
// holders ahead of it, gets the freed permit while the first still holds
// (a waiter watching only the key two places ahead would wait for the
// first holder's release).
func TestSemaphoreLaterHolderReleasesFirst(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	l := newSemaphore(t, s, 2)
	a, b := locktest.MustTryLock(t, l), locktest.MustTryLock(t, l)
	got := locktest.LockAsync(context.Background(), newSemaphore(t, s, 2))
	waitContenders(t, s.Client(), l, 3)
	locktest.UnlockOnce(t, b)
	r := locktest.Receive(t, got)
	if r.Err != nil {
		t.Fatalf("waiter: %v", r.Err)
	}
	locktest.UnlockOnce(t, a)
	locktest.UnlockOnce(t, r.Lease)
}

// TestSemaphoreHolderLeaseRevoked: a holder whose etcd lease ends loses its
// permit to the waiter, learns it (Done, ErrNotHeld), and its Unlock
// cannot touch the permits of others.
func TestSemaphoreHolderLeaseRevoked(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx := context.Background()
	l := newSemaphore(t, s, 2, locks.WithTTL(time.Second))
	old, other := locktest.MustTryLock(t, l), locktest.MustTryLock(t, l)
	got := locktest.LockAsync(ctx, l)
	kvs := waitContenders(t, s.Client(), l, 3)
	if err := s.RevokeLease(ctx, clientv3.LeaseID(kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	r := locktest.Receive(t, got)
	if r.Err != nil {
		t.Fatalf("waiter: %v", r.Err)
	}
	locktest.LostPermitHarmless(t, old, other, r.Lease)
}

// TestSemaphoreAtMostN: goroutines of three clients take permits of a
// semaphore of 3: never more than 3 inside at once.
func TestSemaphoreAtMostN(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	lockers := []locks.Locker{newSemaphore(t, s, 3), newSemaphore(t, s, 3), newSemaphore(t, s, 3)}
	t.Logf("at most %d holders at once", locktest.AtMostPermits(t, 3, lockers, 3, 8, time.Millisecond))
}
