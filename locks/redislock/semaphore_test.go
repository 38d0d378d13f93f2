package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// newSemaphore returns the semaphore "pool" of permits permits on a client
// of its own, as another process would have.
func newSemaphore(t testing.TB, r *redisfake.Server, permits int, opts ...locks.Option) *Semaphore {
	t.Helper()
	s, err := NewSemaphore(r.NewClient(), "pool", permits, append(r.LockOptions(), opts...)...)
	if err != nil {
		t.Fatalf("NewSemaphore: %v", err)
	}
	return s
}

func tryLock(t testing.TB, l locks.Locker) locks.Lease {
	t.Helper()
	lease, err := l.TryLock(context.Background())
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	return lease
}

func refusedTry(t testing.TB, l locks.Locker) {
	t.Helper()
	lease, err := l.TryLock(context.Background())
	if !errors.Is(err, locks.ErrLocked) {
		if lease != nil {
			tok, _ := lease.Token()
			t.Fatalf("TryLock granted token %v, want ErrLocked", tok)
		}
		t.Fatalf("TryLock: %v, want ErrLocked", err)
	}
}

func TestNewSemaphoreValidates(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	if _, err := NewSemaphore(nil, "pool", 2); !errors.Is(err, locks.ErrNilClient) {
		t.Errorf("nil client: %v, want ErrNilClient", err)
	}
	if _, err := NewSemaphore(r.Client(), "", 2); !errors.Is(err, locks.ErrInvalidName) {
		t.Errorf("empty name: %v, want ErrInvalidName", err)
	}
	for _, n := range []int{0, -3} {
		if _, err := NewSemaphore(r.Client(), "pool", n); !errors.Is(err, locks.ErrInvalidOption) {
			t.Errorf("%d permits: %v, want ErrInvalidOption", n, err)
		}
	}
	if _, err := NewSemaphore(r.Client(), "pool", 1, locks.WithTTL(time.Millisecond)); !errors.Is(err, locks.ErrInvalidTTL) {
		t.Errorf("1 ms TTL: %v, want ErrInvalidTTL", err)
	}
	s, err := NewSemaphore(r.Client(), "pool", 3, locks.WithPrefix("p:"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Permits() != 3 || s.Name() != "pool" || s.Key() != "p:{pool}:sem" {
		t.Errorf("Permits %d, Name %q, Key %q", s.Permits(), s.Name(), s.Key())
	}
}

// TestSemaphorePermits: N holders fit, through different Semaphores, with
// tokens that increase from grant to grant; the N+1st is refused until one
// unlocks.
func TestSemaphorePermits(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	const n = 3
	var leases []locks.Lease
	var last locks.Token
	for i := range n {
		lease := tryLock(t, newSemaphore(t, r, n, locks.WithWatchdog(false)))
		tok := locktest.Token(t, lease)
		if tok <= last {
			t.Fatalf("grant %d: token %v not above %v", i, tok, last)
		}
		last = tok
		leases = append(leases, lease)
	}
	other := newSemaphore(t, r, n)
	refusedTry(t, other)
	locktest.UnlockOnce(t, leases[1])
	lease := tryLock(t, other)
	if tok := locktest.Token(t, lease); tok <= last {
		t.Fatalf("token %v after a release not above %v", tok, last)
	}
	refusedTry(t, other)
	for _, l := range append(leases[:1], leases[2], lease) {
		locktest.UnlockOnce(t, l)
	}
	if n, err := r.Client().Exists(context.Background(), other.Key()).Result(); err != nil || n != 0 {
		t.Fatalf("the permits' set is left behind after every unlock (exists %d, %v)", n, err)
	}
}

// TestSemaphoreExpiredPermitReused: a holder that crashed (no watchdog, no
// unlock) loses its permit at its TTL, on the server's clock; the permit is
// taken again, and the expired one can be neither renewed nor released on
// the server (the scripts prune it first), nor through its lease.
func TestSemaphoreExpiredPermitReused(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	const ttl = time.Second
	s := newSemaphore(t, r, 2, locks.WithTTL(ttl), locks.WithWatchdog(false))
	a, b := tryLock(t, s), tryLock(t, s)
	refusedTry(t, s)
	r.Advance(ttl / 2)
	if err := b.Renew(context.Background()); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	r.Advance(ttl/2 + time.Millisecond) // a's permit ends; b's was renewed
	locktest.Closed(t, "expired lease's Done", a.Done())
	if !errors.Is(a.Err(), locks.ErrLeaseExpired) {
		t.Fatalf("Err %v, want ErrLeaseExpired", a.Err())
	}
	c := tryLock(t, s)
	refusedTry(t, s)
	// The expired permit's own operations, straight to the server.
	ops := semOps{s: s, owner: "nobody"}
	if err := ops.Renew(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("renewal of a permit never held: %v, want ErrNotHeld", err)
	}
	if err := a.Renew(context.Background()); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("Renew of the expired lease: %v, want ErrLeaseExpired", err)
	}
	if err := a.Unlock(context.Background()); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("Unlock of the expired lease: %v, want ErrLeaseExpired", err)
	}
	if n, _ := r.Client().ZCard(context.Background(), s.Key()).Result(); n != 2 {
		t.Fatalf("%d permits on the server, want 2 (b and c)", n)
	}
	locktest.UnlockOnce(t, b)
	locktest.UnlockOnce(t, c)
}

// TestSemaphoreRenewDoesNotResurrect: the renewal of a permit whose TTL
// ran out on the server fails with ErrNotHeld and adds nothing, even when
// nobody took the permit meanwhile.
func TestSemaphoreRenewDoesNotResurrect(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	const ttl = time.Second
	s := newSemaphore(t, r, 1, locks.WithTTL(ttl), locks.WithWatchdog(false))
	owner := locks.NewOwner()
	res, err := s.attempt(context.Background(), owner)
	if err != nil || res.status != statusTaken {
		t.Fatalf("attempt: %+v, %v", res, err)
	}
	r.Advance(ttl)
	if err := (semOps{s: s, owner: owner}).Renew(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("renewal after the TTL: %v, want ErrNotHeld", err)
	}
	if err := (semOps{s: s, owner: owner}).Release(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("release after the TTL: %v, want ErrNotHeld", err)
	}
	if n, _ := r.Client().ZCard(context.Background(), s.Key()).Result(); n != 0 {
		t.Fatalf("%d permits on the server after the renewal, want 0", n)
	}
}

// TestSemaphoreLostPermit: a permit removed behind its holder's back
// (another process's bug, a flush) fails the holder's Renew with
// ErrNotHeld, which closes Done; its Unlock then reports the loss.
func TestSemaphoreLostPermit(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	s := newSemaphore(t, r, 2, locks.WithWatchdog(false))
	lease := tryLock(t, s)
	if err := r.Client().Del(context.Background(), s.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := lease.Renew(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Renew: %v, want ErrNotHeld", err)
	}
	locktest.Closed(t, "Done", lease.Done())
	if err := lease.Unlock(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Unlock: %v, want ErrNotHeld", err)
	}
}

// TestSemaphoreWaitWakesOnRelease: with every permit held, Lock waits;
// an Unlock through another client wakes it at once, without time moving.
func TestSemaphoreWaitWakesOnRelease(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	clock := r.Clock().(*fakes.Clock)
	holders := newSemaphore(t, r, 2, locks.WithWatchdog(false))
	a, b := tryLock(t, holders), tryLock(t, holders)
	waiter := newSemaphore(t, r, 2, locks.WithWatchdog(false))
	got := locktest.LockAsync(context.Background(), waiter)
	// Two leases' expiry timers and the waiter's fallback timer.
	if err := clock.WaitTimers(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	before := clock.Now()
	locktest.UnlockOnce(t, a)
	res := locktest.Receive(t, got)
	if res.Err != nil {
		t.Fatalf("Lock: %v", res.Err)
	}
	if !clock.Now().Equal(before) {
		t.Fatalf("time moved by %v", clock.Now().Sub(before))
	}
	if locktest.Token(t, res.Lease) <= locktest.Token(t, b) {
		t.Fatal("the waiter's token is not above the earlier grants'")
	}
	locktest.UnlockOnce(t, res.Lease)
	locktest.UnlockOnce(t, b)
}

// TestSemaphoreWaitFallsBackOnTTL: a holder that crashed never publishes;
// the waiter tries again once the earliest permit's TTL has passed.
func TestSemaphoreWaitFallsBackOnTTL(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	clock := r.Clock().(*fakes.Clock)
	const ttl = time.Second
	crashed := newSemaphore(t, r, 1, locks.WithTTL(ttl), locks.WithWatchdog(false))
	_ = tryLock(t, crashed)
	waiter := newSemaphore(t, r, 1, locks.WithTTL(ttl), locks.WithWatchdog(false))
	got := locktest.LockAsync(context.Background(), waiter)
	if err := clock.WaitTimers(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-got:
		t.Fatalf("Lock returned before the TTL: %v", res.Err)
	case <-time.After(20 * time.Millisecond):
	}
	r.Advance(ttl + 20*time.Millisecond)
	res := locktest.Receive(t, got)
	if res.Err != nil {
		t.Fatalf("Lock: %v", res.Err)
	}
	locktest.UnlockOnce(t, res.Lease)
}

// TestSemaphoreWaitBudget: Lock gives up with ErrWaitBudget and takes no
// permit.
func TestSemaphoreWaitBudget(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	clock := r.Clock().(*fakes.Clock)
	s := newSemaphore(t, r, 1, locks.WithTTL(10*time.Second), locks.WithWaitBudget(time.Second), locks.WithWatchdog(false))
	held := tryLock(t, s)
	got := locktest.LockAsync(context.Background(), s)
	if err := clock.WaitTimers(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	r.Advance(time.Second)
	if res := locktest.Receive(t, got); !errors.Is(res.Err, locks.ErrWaitBudget) {
		t.Fatalf("Lock: %v, want ErrWaitBudget", res.Err)
	}
	if n, _ := r.Client().ZCard(context.Background(), s.Key()).Result(); n != 1 {
		t.Fatalf("%d permits held, want 1", n)
	}
	locktest.UnlockOnce(t, held)
}

// TestSemaphoreAtMostN: goroutines of four clients take permits of a
// semaphore of 3 in real time: never more than 3 inside at once.
func TestSemaphoreAtMostN(t *testing.T) {
	r := redisfake.New(t)
	var lockers []locks.Locker
	for range 4 {
		lockers = append(lockers, newSemaphore(t, r, 3))
	}
	t.Logf("at most %d holders at once", locktest.AtMostPermits(t, 3, lockers, 3, 25, 100*time.Microsecond))
}

func TestSemaphoreMaxHold(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	ttl := locks.WithTTL(10 * time.Second)
	locktest.MaxHold(t, r.Clock(), r.Advance, 3*time.Second,
		newSemaphore(t, r, 1, ttl, locks.WithMaxHold(3*time.Second)), newSemaphore(t, r, 1, ttl))
}

func TestSemaphoreReentrantByOwner(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	locktest.Reentrant(t, newSemaphore(t, r, 1, locks.WithOwner("job-7")),
		newSemaphore(t, r, 1), newSemaphore(t, r, 1, locks.WithOwner("job-7")))
}
