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

// newRW returns the read-write mutex "cfg" on a client of its own, as
// another process would have.
func newRW(t testing.TB, r *redisfake.Server, opts ...locks.Option) *RWMutex {
	t.Helper()
	m, err := NewRWMutex(r.NewClient(), "cfg", append(r.LockOptions(), opts...)...)
	if err != nil {
		t.Fatalf("NewRWMutex: %v", err)
	}
	return m
}

// manualRedis is miniredis in manual time: the scripts read the server's
// TIME, which only miniredis follows.
func manualRedis(t testing.TB) (*redisfake.Server, *fakes.Clock) {
	r := redisfake.New(t, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	return r, r.Clock().(*fakes.Clock)
}

func TestNewRWMutexValidates(t *testing.T) {
	r, _ := manualRedis(t)
	if _, err := NewRWMutex(nil, "cfg"); !errors.Is(err, locks.ErrNilClient) {
		t.Errorf("nil client: %v, want ErrNilClient", err)
	}
	if _, err := NewRWMutex(r.Client(), ""); !errors.Is(err, locks.ErrInvalidName) {
		t.Errorf("empty name: %v, want ErrInvalidName", err)
	}
	if _, err := NewRWMutex(r.Client(), "cfg", locks.WithTTL(time.Millisecond)); !errors.Is(err, locks.ErrInvalidTTL) {
		t.Errorf("1 ms TTL: %v, want ErrInvalidTTL", err)
	}
	m, err := NewRWMutex(r.Client(), "cfg", locks.WithPrefix("p:"))
	if err != nil {
		t.Fatal(err)
	}
	readers, writer, waiting, fence := RWKeys("p:", "cfg")
	if m.Name() != "cfg" || readers != "p:{cfg}:rw:r" || writer != "p:{cfg}:rw:w" || waiting != "p:{cfg}:rw:q" || fence != "p:{cfg}:rw:fence" {
		t.Errorf("Name %q, keys %q %q %q %q", m.Name(), readers, writer, waiting, fence)
	}
}

// TestRWMutexReadersShareWriterExcludes: two readers hold at once, through
// different RWMutexes; a writer is refused until both unlock, and then
// readers are refused; every grant's token is above the one before, in
// either mode.
func TestRWMutexReadersShareWriterExcludes(t *testing.T) {
	r, _ := manualRedis(t)
	a, b := newRW(t, r, locks.WithWatchdog(false)), newRW(t, r, locks.WithWatchdog(false))
	r1 := tryLock(t, a.RLocker())
	r2 := tryLock(t, b.RLocker())
	if locktest.Token(t, r2) <= locktest.Token(t, r1) {
		t.Fatal("the second reader's token is not above the first's")
	}
	refusedTry(t, a.Locker())
	locktest.UnlockOnce(t, r1)
	refusedTry(t, b.Locker())
	locktest.UnlockOnce(t, r2)
	w := tryLock(t, b.Locker())
	if locktest.Token(t, w) <= locktest.Token(t, r2) {
		t.Fatal("the writer's token is not above the readers'")
	}
	refusedTry(t, a.RLocker())
	refusedTry(t, a.Locker())
	locktest.UnlockOnce(t, w)
	r3 := tryLock(t, a.RLocker())
	if locktest.Token(t, r3) <= locktest.Token(t, w) {
		t.Fatal("the reader's token is not above the writer's")
	}
	locktest.UnlockOnce(t, r3)
	keys := a.keys // the fake's prefix, not DefaultPrefix
	if n, err := r.Client().Exists(context.Background(), keys[:3]...).Result(); err != nil || n != 0 {
		t.Fatalf("sets left behind after every unlock (exists %d, %v)", n, err)
	}
}

// TestRWMutexWaitingWriterBlocksNewReaders: a writer waiting behind a
// reader turns a new reader away; the reader's Unlock hands the writer the
// lock at once (no other reader or writer can take it first), without
// time moving, and the writer's Unlock wakes a waiting reader the same way.
func TestRWMutexWaitingWriterBlocksNewReaders(t *testing.T) {
	r, clock := manualRedis(t)
	held := tryLock(t, newRW(t, r, locks.WithWatchdog(false)).RLocker())
	writer := locktest.LockAsync(context.Background(), newRW(t, r, locks.WithWatchdog(false)).Locker())
	// The reader's expiry timer and the writer's fallback timer.
	if err := clock.WaitTimers(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	refusedTry(t, newRW(t, r).RLocker())
	reader := locktest.LockAsync(context.Background(), newRW(t, r, locks.WithWatchdog(false)).RLocker())
	if err := clock.WaitTimers(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	before := clock.Now()
	locktest.UnlockOnce(t, held)
	// The Unlock handed the lock to the waiting writer, whether or not it
	// has looked yet: nobody else gets it.
	refusedTry(t, newRW(t, r).RLocker())
	refusedTry(t, newRW(t, r).Locker())
	w := locktest.Receive(t, writer)
	if w.Err != nil {
		t.Fatalf("writer's Lock: %v", w.Err)
	}
	refusedTry(t, newRW(t, r).RLocker())
	locktest.UnlockOnce(t, w.Lease)
	rd := locktest.Receive(t, reader)
	if rd.Err != nil {
		t.Fatalf("reader's Lock: %v", rd.Err)
	}
	if !clock.Now().Equal(before) {
		t.Fatalf("time moved by %v", clock.Now().Sub(before))
	}
	if locktest.Token(t, rd.Lease) <= locktest.Token(t, w.Lease) {
		t.Fatal("the reader's token is not above the writer's")
	}
	locktest.UnlockOnce(t, rd.Lease)
}

// TestRWMutexWriterGivesUp: a writer that stops waiting (its ctx ends)
// withdraws its place, so readers are admitted again beside the reader
// holding.
func TestRWMutexWriterGivesUp(t *testing.T) {
	r, clock := manualRedis(t)
	held := tryLock(t, newRW(t, r, locks.WithWatchdog(false)).RLocker())
	ctx, cancel := context.WithCancel(context.Background())
	writer := locktest.LockAsync(ctx, newRW(t, r, locks.WithWatchdog(false)).Locker())
	if err := clock.WaitTimers(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	refusedTry(t, newRW(t, r).RLocker())
	cancel()
	if res := locktest.Receive(t, writer); !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("writer's Lock: %v, want context.Canceled", res.Err)
	}
	locktest.UnlockOnce(t, tryLock(t, newRW(t, r, locks.WithWatchdog(false)).RLocker()))
	locktest.UnlockOnce(t, held)
}

// TestRWMutexExpiredLeases: a reader that crashed (no watchdog, no unlock)
// keeps the writer out until its TTL on the server's clock, no longer; a
// writer's place in the wait lapses one TTL after its last attempt, so a
// crashed waiting writer does not keep readers out for good. The expired
// lease can be neither renewed nor released.
func TestRWMutexExpiredLeases(t *testing.T) {
	r, _ := manualRedis(t)
	const ttl = time.Second
	m := newRW(t, r, locks.WithTTL(ttl), locks.WithWatchdog(false))
	crashed := tryLock(t, m.RLocker())
	if _, err := m.write.acq.attempt(context.Background(), "crashed-writer", true); err != nil {
		t.Fatal(err)
	}
	refusedTry(t, m.RLocker())
	r.Advance(ttl + time.Millisecond)
	locktest.Closed(t, "expired lease's Done", crashed.Done())
	if err := (rwOps{m: m, owner: "nobody", set: 1}).Renew(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("renewal of a lease never held: %v, want ErrNotHeld", err)
	}
	if err := crashed.Unlock(context.Background()); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("Unlock of the expired lease: %v, want ErrLeaseExpired", err)
	}
	rd := tryLock(t, m.RLocker())
	refusedTry(t, m.Locker())
	r.Advance(ttl + time.Millisecond)
	w := tryLock(t, m.Locker())
	locktest.UnlockOnce(t, w)
	_ = rd.Unlock(context.Background()) // expired: ErrLeaseExpired
}

// TestRWMutexRenewDoesNotResurrect: a writer's renewal after its TTL ran
// out on the server fails and adds nothing, even with nobody else around.
func TestRWMutexRenewDoesNotResurrect(t *testing.T) {
	r, _ := manualRedis(t)
	const ttl = time.Second
	m := newRW(t, r, locks.WithTTL(ttl), locks.WithWatchdog(false))
	owner := locks.NewOwner()
	if res, err := m.write.acq.attempt(context.Background(), owner, false); err != nil || res.status != statusTaken {
		t.Fatalf("attempt: %+v, %v", res, err)
	}
	r.Advance(ttl)
	ops := rwOps{m: m, owner: owner, set: 2}
	if err := ops.Renew(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("renewal after the TTL: %v, want ErrNotHeld", err)
	}
	if err := ops.Release(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("release after the TTL: %v, want ErrNotHeld", err)
	}
	locktest.UnlockOnce(t, tryLock(t, m.RLocker()))
}

// TestRWMutexWaitFallsBackOnTTL: a writer that crashed never publishes;
// a waiting reader tries again once the writer's TTL has passed.
func TestRWMutexWaitFallsBackOnTTL(t *testing.T) {
	r, clock := manualRedis(t)
	const ttl = time.Second
	_ = tryLock(t, newRW(t, r, locks.WithTTL(ttl), locks.WithWatchdog(false)).Locker())
	got := locktest.LockAsync(context.Background(), newRW(t, r, locks.WithTTL(ttl), locks.WithWatchdog(false)).RLocker())
	if err := clock.WaitTimers(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	r.Advance(ttl + 20*time.Millisecond)
	res := locktest.Receive(t, got)
	if res.Err != nil {
		t.Fatalf("Lock: %v", res.Err)
	}
	locktest.UnlockOnce(t, res.Lease)
}

// TestRWMutexReadersOrOneWriter: goroutines of four clients take read
// and write leases in real time: a writer is never inside with anyone.
func TestRWMutexReadersOrOneWriter(t *testing.T) {
	r := redisfake.New(t)
	var readers, writers []locks.Locker
	for range 2 {
		readers = append(readers, newRW(t, r).RLocker())
		writers = append(writers, newRW(t, r).Locker())
	}
	t.Logf("at most %d readers at once", locktest.ReadersOrOneWriter(t, readers, writers, 2, 25, 100*time.Microsecond))
}

func TestRWMutexMaxHold(t *testing.T) {
	r, _ := manualRedis(t)
	ttl := locks.WithTTL(10 * time.Second)
	locktest.MaxHold(t, r.Clock(), r.Advance, 3*time.Second,
		newRW(t, r, ttl, locks.WithMaxHold(3*time.Second)).Locker(), newRW(t, r, ttl).Locker())
}

func TestRWMutexReentrantByOwner(t *testing.T) {
	r, _ := manualRedis(t)
	locktest.Reentrant(t, newRW(t, r, locks.WithOwner("job-7")).Locker(),
		newRW(t, r).Locker(), newRW(t, r, locks.WithOwner("job-7")).Locker())
}
