package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

func TestNewValidates(t *testing.T) {
	g := redisfake.NewCluster(t, 3)
	clients := g.Clients()
	var nilClient *redis.Client
	tests := []struct {
		name    string
		clients []redis.UniversalClient
		lock    string
		opts    []locks.Option
		want    error
	}{
		{"nil clients", nil, "job", nil, locks.ErrNilClient},
		{"no clients", []redis.UniversalClient{}, "job", nil, locks.ErrNilClient},
		{"nil client", []redis.UniversalClient{clients[0], nil, clients[2]}, "job", nil, locks.ErrNilClient},
		{"typed nil client", []redis.UniversalClient{clients[0], nilClient}, "job", nil, locks.ErrNilClient},
		{"empty name", clients, "", nil, locks.ErrInvalidName},
		{"control character", clients, "a\nb", nil, locks.ErrInvalidName},
		{"TTL 0", clients, "job", []locks.Option{locks.WithTTL(0)}, locks.ErrInvalidTTL},
		{"negative budget", clients, "job", []locks.Option{locks.WithWaitBudget(-time.Second)}, locks.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(tt.clients, tt.lock, tt.opts...)
			if !errors.Is(err, tt.want) || l != nil {
				t.Fatalf("New = %v, %v; want nil, an error wrapping %v", l, err, tt.want)
			}
		})
	}
}

func TestKeyAndQuorum(t *testing.T) {
	g := redisfake.NewCluster(t, 4)
	l := newLocker(t, g, nil)
	if want := g.Prefix() + "{job}"; l.Key() != want {
		t.Errorf("Key() = %q, want %q", l.Key(), want)
	}
	if l.Quorum() != 3 {
		t.Errorf("Quorum() = %d with 4 nodes, want 3", l.Quorum())
	}
	if l.Name() != "job" {
		t.Errorf("Name() = %q", l.Name())
	}
}

func TestLeaseHasNoFencingToken(t *testing.T) {
	g := redisfake.NewCluster(t, 3)
	lease := mustTryLock(t, newLocker(t, g, nil))
	defer lease.Unlock(testCtx(t))
	if tok, ok := lease.Token(); ok || tok != 0 {
		t.Fatalf("Token() = %v, %v; want 0, false: Redlock has no safe fencing token", tok, ok)
	}
}

func TestTryLockHoldsEveryNodeUntilUnlock(t *testing.T) {
	g := redisfake.NewCluster(t, 5)
	l := newLocker(t, g, nil)
	lease := mustTryLock(t, l)
	got := owners(t, g, l.Key())
	for i, o := range got {
		if o == "" || o != got[0] {
			t.Fatalf("node %d holds %q, node 0 %q: want one owner on every node", i, o, got[0])
		}
	}
	other := newLocker(t, g, g.NewClients())
	if _, err := other.TryLock(testCtx(t)); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("second TryLock = %v, want ErrLocked", err)
	}
	if err := lease.Unlock(testCtx(t)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	requireNoKey(t, g, l.Key())
	mustTryLock(t, other).Unlock(testCtx(t))
}

func TestDoubleUnlock(t *testing.T) {
	g := redisfake.NewCluster(t, 3)
	lease := mustTryLock(t, newLocker(t, g, nil))
	ctx := testCtx(t)
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := lease.Unlock(ctx); !errors.Is(err, locks.ErrReleased) {
		t.Fatalf("second Unlock = %v, want ErrReleased", err)
	}
	if err := lease.Renew(ctx); !errors.Is(err, locks.ErrReleased) {
		t.Fatalf("Renew after Unlock = %v, want ErrReleased", err)
	}
}

func TestCancelledContext(t *testing.T) {
	g := redisfake.NewCluster(t, 3)
	l := newLocker(t, g, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.TryLock(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("TryLock = %v, want context.Canceled", err)
	}
	if _, err := l.Lock(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Lock = %v, want context.Canceled", err)
	}
	requireNoKey(t, g, l.Key())
}

func TestLockCancelledWhileWaiting(t *testing.T) {
	g, clock := manual(t, 3)
	holder := newLocker(t, g, nil, locks.WithWatchdog(false))
	lease := mustTryLock(t, holder)
	defer lease.Unlock(testCtx(t))

	ctx, cancel := context.WithCancel(context.Background())
	ch := locktest.LockAsync(ctx, newLocker(t, g, g.NewClients()))
	waitTimers(t, clock, 2) // the holder's expiry, the waiter's retry
	cancel()
	if o := locktest.Receive(t, ch); !errors.Is(o.Err, context.Canceled) {
		t.Fatalf("Lock = %v, %v; want context.Canceled", o.Lease, o.Err)
	}
}

func TestObserverSeesAcquisition(t *testing.T) {
	g := redisfake.NewCluster(t, 3)
	var obs events
	lease := mustTryLock(t, newLocker(t, g, nil, locks.WithObserver(&obs)))
	want := locks.Event{Point: locks.PointAcquired, Name: "job"}
	if got := obs.get(); len(got) != 1 || got[0] != want {
		t.Fatalf("events after TryLock = %v, want [%v]", got, want)
	}
	if err := lease.Unlock(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestRenewResetsTTLOnEveryNode(t *testing.T) {
	g, clock := manual(t, 3, redisfake.ForceMiniredis())
	l := newLocker(t, g, nil, locks.WithWatchdog(false))
	lease := mustTryLock(t, l)
	g.Advance(600 * time.Millisecond)
	ctx := testCtx(t)
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	for i, n := range g.Nodes() {
		if got := n.Client().PTTL(ctx, l.Key()).Val(); got != testTTL {
			t.Errorf("node %d: PTTL after Renew = %v, want %v", i, got, testTTL)
		}
	}
	if want := clock.Now().Add(testTTL - locks.Drift(testTTL)); !lease.Deadline().Equal(want) {
		t.Errorf("Deadline after Renew = %v, want %v", lease.Deadline(), want)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestKeyIsWhereTheLockLives: a held lock is Key on every node, holding
// the lease's owner, and the fake's ExpireLock, which finds the key through
// the same layout, frees it on every node. A change of the key on either
// side fails here.
func TestKeyIsWhereTheLockLives(t *testing.T) {
	g, _ := manual(t, 3)
	l := newLocker(t, g, nil)
	key := Key(g.Prefix(), "job")
	if l.Key() != key {
		t.Fatalf("Locker.Key() = %q, Key = %q", l.Key(), key)
	}
	lease := mustTryLock(t, l)
	for i, v := range owners(t, g, key) {
		if v == "" {
			t.Errorf("node %d holds nothing under %s", i, key)
		}
	}
	locktest.ExpiredFromOutside(t, lease, func(ctx context.Context) error { return g.ExpireLock(ctx, "job") }, fakes.ErrNoHolder)
	requireNoKey(t, g, key)
}
