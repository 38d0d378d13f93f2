package redlock

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// nodeErrors returns the *NodeError leaves of err's tree.
func nodeErrors(err error) []*NodeError {
	if ne, ok := err.(*NodeError); ok {
		return []*NodeError{ne}
	}
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		var out []*NodeError
		for _, x := range e.Unwrap() {
			out = append(out, nodeErrors(x)...)
		}
		return out
	case interface{ Unwrap() error }:
		return nodeErrors(e.Unwrap())
	}
	return nil
}

// With 2 of 5 nodes down the lock works as usual: a majority is still there.
func TestMinorityDown(t *testing.T) {
	g, clock := manual(t, 5, redisfake.ForceMiniredis())
	g.Stop(0)
	g.Stop(3)
	l := newLocker(t, g, nil)
	ctx := testCtx(t)

	lease := mustTryLock(t, l)
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	requireNoKey(t, g, l.Key(), 0, 3)

	lease, err := l.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	// A waiter subscribes on the 3 live nodes only, and is still notified.
	ch := locktest.LockAsync(ctx, newLocker(t, g, g.NewClients()))
	waitTimers(t, clock, 3) // the lease's expiry and watchdog, the waiter's retry
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	o := locktest.Receive(t, ch)
	if o.Err != nil {
		t.Fatalf("waiter's Lock: %v", o.Err)
	}
	if err := o.Lease.Unlock(ctx); err != nil {
		t.Fatalf("waiter's Unlock: %v", err)
	}
}

// With 3 of 5 nodes down no majority can be reached: TryLock and Lock fail
// at once with ErrNoQuorum and leave nothing on the live nodes.
func TestMajorityDown(t *testing.T) {
	g := redisfake.NewCluster(t, 5, redisfake.ForceMiniredis())
	down := []int{0, 2, 4}
	for _, i := range down {
		g.Stop(i)
	}
	l := newLocker(t, g, nil)
	ctx := testCtx(t)
	deadline, _ := ctx.Deadline()

	_, err := l.TryLock(ctx)
	if !errors.Is(err, locks.ErrNoQuorum) {
		t.Fatalf("TryLock = %v, want ErrNoQuorum", err)
	}
	if got := nodeErrors(err); len(got) != len(down) {
		t.Errorf("TryLock error has %d node errors, want %d: %v", len(got), len(down), err)
	}
	requireNoKey(t, g, l.Key(), down...)

	lease, err := l.Lock(ctx)
	if !errors.Is(err, locks.ErrNoQuorum) || lease != nil {
		t.Fatalf("Lock = %v, %v; want ErrNoQuorum", lease, err)
	}
	if time.Now().After(deadline) {
		t.Fatal("Lock returned after its ctx deadline")
	}
	requireNoKey(t, g, l.Key(), down...)
}

// A node that set the key but whose reply was lost counts as failed, and the
// failed attempt still deletes the key there.
func TestLostRepliesAreCleanedUp(t *testing.T) {
	g := redisfake.NewCluster(t, 5)
	clients := g.NewClients()
	var applied atomic.Int32
	for _, c := range clients[:3] {
		c.AddHook(lostReply{applied: &applied})
	}
	l := newLocker(t, g, clients)

	_, err := l.TryLock(testCtx(t))
	if !errors.Is(err, locks.ErrNoQuorum) || !errors.Is(err, errLostReply) {
		t.Fatalf("TryLock = %v, want ErrNoQuorum joined with the lost replies", err)
	}
	if got := nodeErrors(err); len(got) != 3 {
		t.Errorf("%d node errors, want 3: %v", len(got), err)
	}
	if applied.Load() != 3 {
		t.Fatalf("the SET ran on %d of the 3 nodes whose replies were lost", applied.Load())
	}
	requireNoKey(t, g, l.Key())
}

// A split vote, two owners on two nodes each, is ErrLocked; the one node
// this attempt won is cleaned up and the other owners' keys stay.
func TestSplitVote(t *testing.T) {
	g := redisfake.NewCluster(t, 5)
	l := newLocker(t, g, nil)
	ctx := testCtx(t)
	foreign := []string{"a", "a", "b", "b", ""}
	for i, o := range foreign {
		if o != "" {
			g.Node(i).Client().Set(ctx, l.Key(), o, time.Minute)
		}
	}
	_, err := l.TryLock(ctx)
	if !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock = %v, want ErrLocked", err)
	}
	got := owners(t, g, l.Key())
	for i := range foreign {
		if got[i] != foreign[i] {
			t.Errorf("node %d holds %q, want %q", i, got[i], foreign[i])
		}
	}
}

// A majority that answers after the validity ran out is not a lock.
func TestMajorityTooLate(t *testing.T) {
	g, clock := manual(t, 3)
	clients := g.NewClients()
	clients[1].AddHook(slowNode{clock: clock, d: testTTL})
	l := newLocker(t, g, clients)
	_, err := l.TryLock(testCtx(t))
	if !errors.Is(err, locks.ErrNoQuorum) {
		t.Fatalf("TryLock = %v, want ErrNoQuorum", err)
	}
	requireNoKey(t, g, l.Key())
}

// Once the nodes say the owner is gone, Renew and Unlock report ErrNotHeld
// and leave the new holder alone. The keys vanish behind the holder's back
// (a flush, a failover without persistence) while its lease is still valid
// locally, and another owner takes the lock.
func TestTakenOverWhileValid(t *testing.T) {
	g, _ := manual(t, 5)
	a := newLocker(t, g, nil, locks.WithWatchdog(false))
	b := newLocker(t, g, g.NewClients(), locks.WithWatchdog(false))
	ctx := testCtx(t)

	t.Run("Renew", func(t *testing.T) {
		stale := mustTryLock(t, a)
		deleteOn(t, g, a.Key(), 0, 1, 2, 3, 4)
		taken := mustTryLock(t, b)
		if err := stale.Renew(ctx); !errors.Is(err, locks.ErrNotHeld) {
			t.Errorf("stale Renew = %v, want ErrNotHeld", err)
		}
		if !errors.Is(stale.Err(), locks.ErrNotHeld) {
			t.Errorf("stale lease's Err() = %v, want ErrNotHeld", stale.Err())
		}
		if err := taken.Unlock(ctx); err != nil {
			t.Errorf("new holder's Unlock: %v", err)
		}
	})
	t.Run("Unlock", func(t *testing.T) {
		stale := mustTryLock(t, a)
		deleteOn(t, g, a.Key(), 0, 1, 2)
		taken := mustTryLock(t, b) // a majority: nodes 0, 1 and 2
		if err := stale.Unlock(ctx); !errors.Is(err, locks.ErrNotHeld) {
			t.Errorf("stale Unlock = %v, want ErrNotHeld", err)
		}
		if err := taken.Renew(ctx); err != nil {
			t.Errorf("new holder's Renew after the stale Unlock: %v", err)
		}
		if err := taken.Unlock(ctx); err != nil {
			t.Errorf("new holder's Unlock: %v", err)
		}
	})
}

func deleteOn(t testing.TB, g *redisfake.Nodes, key string, nodes ...int) {
	t.Helper()
	for _, i := range nodes {
		if err := g.Node(i).Client().Del(testCtx(t), key).Err(); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("DEL on node %d: %v", i, err)
		}
	}
}
