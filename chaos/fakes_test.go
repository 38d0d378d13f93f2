package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/locks/redlock"
)

// TestRedlockClockJumpDoubleGrant: A holds exactly nodes 0, 1, 2 (3 and 4
// were down); node 2's clock jumps a TTL forward, so A's key there expires
// early, and B wins nodes 2, 3, 4 while A's lease is live.
func TestRedlockClockJumpDoubleGrant(t *testing.T) {
	const ttl = 10 * time.Second
	g := redisfake.NewCluster(t, 5, redisfake.ForceMiniredis(), redisfake.ManualTime(epoch))
	ctx := context.Background()
	opts := append(g.LockOptions(), locks.WithTTL(ttl), locks.WithWatchdog(false))
	la, err := redlock.New(g.Clients(), "job", opts...)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := redlock.New(g.NewClients(), "job", opts...)
	if err != nil {
		t.Fatal(err)
	}
	g.Stop(3)
	g.Stop(4)
	a, err := la.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Unlock(ctx)
	g.Restart(3, true)
	g.Restart(4, true)
	if _, err := lb.TryLock(ctx); err == nil {
		t.Fatal("B won before any clock jumped")
	}
	g.JumpNode(2, ttl)
	b, err := lb.TryLock(ctx)
	if err != nil {
		t.Fatalf("B after node 2's clock jumped: %v", err)
	}
	defer b.Unlock(ctx)
	if !doubleGrant(a, g.Clock().Now()) {
		t.Fatalf("B was granted but A's lease had ended (%v)", a.Err())
	}
}

// TestCrashedHolderLosesTheLockWithinTTL: a crashed client's watchdog stops,
// so its lock runs out within the TTL and a waiter gets it (deadlock
// freedom); a live client's watchdog keeps the same lock held.
func TestCrashedHolderLosesTheLockWithinTTL(t *testing.T) {
	for _, crash := range []bool{false, true} {
		r := redisfake.New(t, redisfake.ManualTime(epoch))
		const ttl = time.Second
		ctx := context.Background()
		c := chaos.CrashAt(0)
		a, err := redislock.New(r.Client(), "job", append(r.LockOptions(), locks.WithTTL(ttl), locks.WithObserver(c))...)
		if err != nil {
			t.Fatal(err)
		}
		b, err := redislock.New(r.NewClient(), "job", append(r.LockOptions(), locks.WithTTL(ttl))...)
		if err != nil {
			t.Fatal(err)
		}
		held, err := a.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if crash {
			c.Now()
		}
		// Step through two TTLs in thirds, so the watchdog gets its turns;
		// a live one has renewed and rescheduled itself (its timer and the
		// lease's expiry timer pending) before time moves on.
		clock := r.Clock().(*fakes.Clock)
		for range 6 {
			r.Advance(ttl / 3)
			if !crash {
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := clock.WaitTimers(wctx, 2)
				cancel()
				if err != nil {
					t.Fatalf("live holder's watchdog did not reschedule: %v", err)
				}
			}
		}
		lease, err := b.TryLock(ctx)
		switch {
		case crash && err != nil:
			t.Fatalf("crashed holder: the waiter could not take the lock after 2 TTLs: %v", err)
		case !crash && err == nil:
			t.Fatal("live holder: its watchdog did not keep the lock")
		}
		if lease != nil {
			_ = lease.Unlock(ctx)
		}
		if !crash {
			_ = held.Unlock(ctx)
		}
	}
}

// TestExpireLock: the control ends a live lease, and says when there is none.
func TestExpireLock(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(epoch))
	ctx := context.Background()
	l, err := redislock.New(r.Client(), "job", r.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	held, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ExpireLock(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	if err := held.Renew(ctx); err == nil {
		t.Fatal("Renew after ExpireLock succeeded")
	}
	if err := r.ExpireLock(ctx, "job"); err == nil {
		t.Fatal("ExpireLock with no lease held succeeded")
	}
}
