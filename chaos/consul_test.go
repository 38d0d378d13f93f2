package chaos_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/consullock"
)

// TestConsulBlackholedHolderNoticesWithinTTL: the holder's link to Consul
// drops every packet both ways (no RST, nothing comes back). Its renewals
// cannot get through, and it must notice the loss within the TTL: Done()
// closes by its local deadline, never minutes later (hashicorp/consul#18271).
// Meanwhile its session expires on the server and a waiter takes over with
// a higher token.
func TestConsulBlackholedHolderNoticesWithinTTL(t *testing.T) {
	c := consulfake.New(t, consulfake.ForceMiniconsul(), consulfake.ManualTime(epoch))
	const ttl = 10 * time.Second
	ctx := context.Background()
	p := chaos.TestProxy(t, c.Addr())
	viaProxy, err := api.NewClient(&api.Config{Address: p.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := consullock.New(viaProxy, "job", append(c.LockOptions(), locks.WithTTL(ttl), locks.WithRequestTimeout(200*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := consullock.New(c.NewClient(), "job", append(c.LockOptions(), locks.WithTTL(ttl))...)
	if err != nil {
		t.Fatal(err)
	}
	var fence locks.Fence[string]
	held, err := a.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tokA, _ := held.Token()
	if err := fence.Write(tokA, "a"); err != nil {
		t.Fatal(err)
	}

	p.Cut(chaos.Up, chaos.Drop)
	p.Cut(chaos.Down, chaos.Drop)
	// One TTL passes on every clock: A's renewals are lost on the way.
	for range 3 {
		c.Advance(ttl / 3)
	}
	select {
	case <-held.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the blackholed holder's Done() did not close once its TTL had passed")
	}
	if !errors.Is(held.Err(), locks.ErrLeaseExpired) && !errors.Is(held.Err(), locks.ErrNotHeld) {
		t.Fatalf("the blackholed holder's Err() = %v, want expired or not held", held.Err())
	}
	// On the server, A's session runs out (Consul invalidates between TTL
	// and 2×TTL), and the waiter gets the lock after the lock-delay.
	c.Advance(ttl)
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := make(chan error, 1)
	var next locks.Lease
	go func() {
		var err error
		next, err = b.Lock(bctx)
		got <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("waiter after the holder's session ran out: %v", err)
			}
			defer next.Unlock(ctx)
			tokB, _ := next.Token()
			if tokB <= tokA {
				t.Fatalf("new token %v not above the blackholed holder's %v", tokB, tokA)
			}
			if err := fence.Write(tokB, "b"); err != nil {
				t.Fatal(err)
			}
			if err := fence.Write(tokA, "a again"); !errors.Is(err, locks.ErrStaleToken) {
				t.Fatalf("blackholed holder's write: %v, want ErrStaleToken", err)
			}
			p.Heal()
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter never got the lock")
		}
		c.Advance(time.Second) // lock-delay and the waiter's blocking query run on the manual clock
		time.Sleep(time.Millisecond)
	}
}

// TestConsulExpireLock: the fake's control invalidates the holder's session:
// the holder's Done() closes, and a second call finds nobody holding.
func TestConsulExpireLock(t *testing.T) {
	c := consulfake.New(t, consulfake.ForceMiniconsul(), consulfake.ManualTime(epoch))
	ctx := context.Background()
	l, err := consullock.New(c.Client(), "job", c.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	held, err := l.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ExpireLock(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done() did not close after the holder's session was expired")
	}
	if err := c.ExpireLock(ctx, "job"); err == nil {
		t.Fatal("ExpireLock with nobody holding succeeded")
	}
}
