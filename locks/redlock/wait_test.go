package redlock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
	"github.com/redis/go-redis/v9"
)

// A waiter wakes on the holder's Unlock with the clock standing still: it is
// notified, not polling.
func TestLockWakesOnRelease(t *testing.T) {
	g, clock := manual(t, 5)
	holder := newLocker(t, g, nil)
	lease := mustTryLock(t, holder)
	ctx := testCtx(t)

	waiter := newLocker(t, g, g.NewClients())
	ch := locktest.LockAsync(ctx, waiter)
	waitTimers(t, clock, 3) // the lease's expiry and watchdog, the waiter's retry
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	o := locktest.Receive(t, ch)
	if o.Err != nil {
		t.Fatalf("waiter's Lock: %v", o.Err)
	}
	if !clock.Now().Equal(epoch) {
		t.Fatalf("the clock moved to %v", clock.Now())
	}
	if waiter.subscribed() {
		t.Error("Lock returned with its subscriptions open")
	}
	if err := o.Lease.Unlock(ctx); err != nil {
		t.Fatalf("waiter's Unlock: %v", err)
	}
}

// A holder that crashes never unlocks: the waiter gets the lock once the
// keys expire, and the stale lease reports it expired.
func TestHolderCrash(t *testing.T) {
	g, clock := manual(t, 5)
	holder := newLocker(t, g, nil, locks.WithWatchdog(false))
	stale := mustTryLock(t, holder)
	ctx := testCtx(t)

	ch := locktest.LockAsync(ctx, newLocker(t, g, g.NewClients()))
	waitTimers(t, clock, 2) // the stale lease's expiry, the waiter's retry
	g.Advance(testTTL + maxJitter)
	o := locktest.Receive(t, ch)
	if o.Err != nil {
		t.Fatalf("waiter's Lock after the TTL: %v", o.Err)
	}
	// The stale lease's clock is past its deadline: Err says so at once,
	// whether or not its expiry timer, which the Advance fired, has run.
	if err := stale.Err(); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("stale lease's Err after the waiter's grant: %v, want ErrLeaseExpired", err)
	}
	select {
	case <-stale.Done():
	default:
		t.Fatal("the stale lease's Err reported it expired, but its Done is open")
	}
	for _, err := range []error{stale.Renew(ctx), stale.Unlock(ctx)} {
		if !errors.Is(err, locks.ErrLeaseExpired) && !errors.Is(err, locks.ErrNotHeld) {
			t.Errorf("stale lease: %v, want ErrLeaseExpired or ErrNotHeld", err)
		}
	}
	if err := o.Lease.Renew(ctx); err != nil {
		t.Errorf("new holder's Renew after the stale Unlock: %v", err)
	}
	if err := o.Lease.Unlock(ctx); err != nil {
		t.Errorf("new holder's Unlock: %v", err)
	}
}

func TestWaitBudget(t *testing.T) {
	g, clock := manual(t, 3)
	lease := mustTryLock(t, newLocker(t, g, nil, locks.WithWatchdog(false)))
	defer lease.Unlock(testCtx(t))
	budget := testTTL / 4

	ch := locktest.LockAsync(testCtx(t), newLocker(t, g, g.NewClients(), locks.WithWaitBudget(budget)))
	waitTimers(t, clock, 3) // the lease's expiry, the waiter's budget and retry
	g.Advance(budget)
	if o := locktest.Receive(t, ch); !errors.Is(o.Err, locks.ErrWaitBudget) {
		t.Fatalf("Lock = %v, %v; want ErrWaitBudget", o.Lease, o.Err)
	}
}

// Goroutines of one Locker take turns: each Unlock hands the lock to the
// next waiter, with the clock standing still.
func TestGoroutinesOfOneLockerTakeTurns(t *testing.T) {
	g, clock := manual(t, 3)
	l := newLocker(t, g, nil, locks.WithWatchdog(false))
	lease := mustTryLock(t, l)
	ctx := testCtx(t)
	const waiters = 4
	done := make(chan locktest.Result, waiters)
	for range waiters {
		go func() {
			lease, err := l.Lock(ctx)
			done <- locktest.Result{Lease: lease, Err: err}
		}()
	}
	for range waiters {
		waitTimers(t, clock, 2) // the holder's expiry, the first waiter's retry
		if err := lease.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		o := locktest.Receive(t, done)
		if o.Err != nil {
			t.Fatalf("Lock: %v", o.Err)
		}
		lease = o.Lease
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !clock.Now().Equal(epoch) {
		t.Fatalf("the clock moved to %v", clock.Now())
	}
}

// Lock returns at once when the lock is free, without subscribing.
func TestLockUncontended(t *testing.T) {
	g, _ := manual(t, 3)
	l := newLocker(t, g, nil)
	lease, err := l.Lock(testCtx(t))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if l.subscribed() {
		t.Error("an uncontended Lock left a subscription open")
	}
	if err := lease.Unlock(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestPlan(t *testing.T) {
	split := map[string]int{"a": 2, "b": 2}
	tests := []struct {
		name       string
		h, prev    hint
		listen     bool
		min, below time.Duration // min <= delay < below
	}{
		{"majority holder", hint{held: map[string]int{"a": 3}, holder: "a", expiry: time.Second, took: time.Millisecond},
			hint{}, true, time.Second, time.Second + maxJitter},
		{"new split", hint{held: split, expiry: time.Second, took: 3 * time.Millisecond},
			hint{held: map[string]int{"a": 3}}, false, 0, 6*time.Millisecond + 1},
		{"persistent split", hint{held: split, expiry: time.Second, took: 3 * time.Millisecond},
			hint{held: split}, true, time.Second, time.Second + maxJitter},
		{"new split on a manual clock", hint{held: split, expiry: time.Second},
			hint{}, false, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 100 {
				p := plan(tt.h, tt.prev, locks.Options{}.Jitter)
				if p.listen != tt.listen || p.delay < tt.min || p.delay >= tt.below {
					t.Fatalf("plan = %+v, want listen %v and delay in [%v, %v)", p, tt.listen, tt.min, tt.below)
				}
			}
		})
	}
}

// Two other owners split the nodes and keep their keys: the waiter backs
// off once, then waits for any release, and takes the lock on the first.
func TestLockWaitsOutASplitVote(t *testing.T) {
	g, clock := manual(t, 5)
	l := newLocker(t, g, nil)
	ctx := testCtx(t)
	for i, o := range []string{"a", "a", "b", "b"} {
		g.Node(i).Client().Set(ctx, l.Key(), o, time.Minute)
	}
	ch := locktest.LockAsync(ctx, l)
	waitTimers(t, clock, 1) // the waiter's fallback: the keys' expiry
	deleteOn(t, g, l.Key(), 0, 1)
	if err := g.Node(0).Client().Publish(ctx, l.channel, "a").Err(); err != nil {
		t.Fatal(err)
	}
	o := locktest.Receive(t, ch)
	if o.Err != nil {
		t.Fatalf("Lock: %v", o.Err)
	}
	if got := owners(t, g, l.Key()); got[2] != "b" || got[3] != "b" || got[0] != got[1] || got[0] != got[4] {
		t.Errorf("owners after the split: %q", got)
	}
	if err := o.Lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// An owner holds a majority and two nodes are free (they lost the key, or
// were down when it was set): the waiter's attempt wins those two and
// releases them again, and that release, published on the waiter's own
// subscription, must not wake it: it would retry at once, release again and
// spin for as long as the holder keeps its majority. The suite's
// redlock/node-down cell found this (a Lock of 18,000 requests in one run).
func TestOwnReleaseDoesNotWakeTheWaiter(t *testing.T) {
	g, clock := manual(t, 5)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	l := newLocker(t, g, g.NewClients())
	for i := range 3 {
		g.Node(i).Client().Set(ctx, l.Key(), "holder", time.Minute)
	}
	var attempts atomic.Int64 // node requests of acquisition attempts
	for _, c := range l.nodes {
		c.client.AddHook(attemptHook{&attempts})
	}
	released := g.Node(3).Client().Subscribe(ctx, l.channel)
	defer released.Close()
	if _, err := released.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	ch := locktest.LockAsync(ctx, l)
	msg, err := released.ReceiveMessage(ctx) // the first attempt let node 3 go
	if err != nil {
		t.Fatal(err)
	}
	waitTimers(t, clock, 1) // the waiter's fallback: the holder's expiry
	// Nothing may happen now until the holder's key expires, which on
	// the manual clock is never: give the waiter a wall-time second to
	// show that it spins (the release reaches it within milliseconds).
	n := attempts.Load()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && attempts.Load() == n; {
		time.Sleep(time.Millisecond)
	}
	if m := attempts.Load(); m != n || n > 10 {
		t.Errorf("the waiter retried after its own release (of %s) while the holder kept its majority: %d node requests, then %d (want 10: an attempt before and after subscribing)", msg.Payload, n, m)
	}
	cancel()
	if o := locktest.Receive(t, ch); !errors.Is(o.Err, context.Canceled) {
		t.Errorf("Lock = %v, %v; want context.Canceled", o.Lease, o.Err)
	}
}

// attemptHook counts the transactions (acquisition attempts) a client sends.
type attemptHook struct{ n *atomic.Int64 }

func (attemptHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (attemptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h attemptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}
