package fakes_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// newMemLock returns a lock on a manual clock, without watchdog so that the
// only timers pending are those a test expects.
func newMemLock(t *testing.T, opts ...locks.Option) (*fakes.MemLock, *fakes.Clock) {
	t.Helper()
	clock := fakes.NewClock(epoch)
	base := []locks.Option{locks.WithClock(clock), locks.WithTTL(time.Second), locks.WithWatchdog(false)}
	l, err := fakes.NewMemLock("orders", append(base, opts...)...)
	if err != nil {
		t.Fatalf("NewMemLock: %v", err)
	}
	return l, clock
}

func mustTryLock(t *testing.T, l *fakes.MemLock) locks.Lease {
	t.Helper()
	lease, err := l.TryLock(context.Background())
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	return lease
}

// waitTimers waits until n timers are pending on clock.
func waitTimers(t *testing.T, clock *fakes.Clock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := clock.WaitTimers(ctx, n); err != nil {
		t.Fatalf("waiting for %d timers (have %d): %v", n, clock.Pending(), err)
	}
}

func TestMemLockExcludesUnderContention(t *testing.T) {
	const workers, rounds = 16, 50
	l, err := fakes.NewMemLock("counter")
	if err != nil {
		t.Fatalf("NewMemLock: %v", err)
	}
	var fence locks.Fence[int]
	ctx := context.Background()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				if err := increment(ctx, l, &fence); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := fence.Value(); got != workers*rounds {
		t.Errorf("counter = %d, want %d", got, workers*rounds)
	}
	if st := fence.Stats(); st.Rejected != 0 {
		t.Errorf("fence rejected %d reads or writes", st.Rejected)
	}
	if got := l.Grants(); got != workers*rounds {
		t.Errorf("Grants() = %d, want %d", got, workers*rounds)
	}
}

// increment does one fenced read-modify-write under the lock.
func increment(ctx context.Context, l *fakes.MemLock, fence *locks.Fence[int]) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	tok, _ := lease.Token()
	v, err := fence.Read(tok)
	if err == nil {
		err = fence.Write(tok, v+1)
	}
	return errors.Join(err, lease.Unlock(ctx))
}

func TestMemLockTokensIncrease(t *testing.T) {
	l, _ := newMemLock(t)
	ctx := context.Background()
	for want := locks.Token(1); want <= 3; want++ {
		lease := mustTryLock(t, l)
		if got := locktest.Token(t, lease); got != want {
			t.Fatalf("grant %d has token %v", want, got)
		}
		if tok, held := l.Holder(); !held || tok != want {
			t.Fatalf("Holder() = %v, %v; want %v, true", tok, held, want)
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	if _, held := l.Holder(); held {
		t.Fatal("Holder() reports a holder after Unlock")
	}
}

func TestMemLockTryLockWhenHeld(t *testing.T) {
	l, _ := newMemLock(t)
	mustTryLock(t, l)
	if lease, err := l.TryLock(context.Background()); !errors.Is(err, locks.ErrLocked) || lease != nil {
		t.Fatalf("second TryLock = %v, %v; want nil, ErrLocked", lease, err)
	}
}

func TestMemLockStaleUnlockLeavesTheHolder(t *testing.T) {
	ctx := context.Background()
	l, _ := newMemLock(t)
	stale := mustTryLock(t, l)
	l.ExpireNow()
	current := mustTryLock(t, l)

	if err := stale.Unlock(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Unlock of a taken-over lease = %v, want ErrNotHeld", err)
	}
	if tok, held := l.Holder(); !held || tok != locktest.Token(t, current) {
		t.Fatalf("Holder() = %v, %v after a stale unlock; want %v, true", tok, held, locktest.Token(t, current))
	}
	if err := current.Renew(ctx); err != nil {
		t.Fatalf("Renew by the holder: %v", err)
	}
}

func TestMemLockDoubleUnlock(t *testing.T) {
	ctx := context.Background()
	l, _ := newMemLock(t)
	lease := mustTryLock(t, l)
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

func TestMemLockExpiryLetsAWaiterIn(t *testing.T) {
	l, clock := newMemLock(t)
	holder := mustTryLock(t, l)
	res := locktest.LockAsync(context.Background(), l)
	waitTimers(t, clock, 2) // the holder's lease deadline, the waiter's expiry timer

	clock.Advance(time.Second)
	r := locktest.Receive(t, res)
	if r.Err != nil {
		t.Fatalf("Lock after the holder's TTL: %v", r.Err)
	}
	if got := locktest.Token(t, r.Lease); got != 2 {
		t.Errorf("waiter's token = %v, want 2", got)
	}
	<-holder.Done()
	if err := holder.Err(); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Errorf("holder's Err() = %v, want ErrLeaseExpired", err)
	}
}

func TestMemLockRenewMovesTheExpiry(t *testing.T) {
	ctx := context.Background()
	l, clock := newMemLock(t)
	lease := mustTryLock(t, l)
	clock.Advance(900 * time.Millisecond)
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	clock.Advance(900 * time.Millisecond)
	if _, held := l.Holder(); !held {
		t.Fatal("renewed lease expired one TTL after its grant")
	}
	clock.Advance(100 * time.Millisecond)
	if _, held := l.Holder(); held {
		t.Fatal("lease still held one TTL after its renewal")
	}
}

func TestMemLockExpireNow(t *testing.T) {
	ctx := context.Background()
	l, clock := newMemLock(t)
	holder := mustTryLock(t, l)
	res := locktest.LockAsync(ctx, l)
	waitTimers(t, clock, 2)

	l.ExpireNow()
	if r := locktest.Receive(t, res); r.Err != nil {
		t.Fatalf("waiter after ExpireNow: %v", r.Err)
	}
	if err := holder.Renew(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("holder's Renew after ExpireNow = %v, want ErrNotHeld", err)
	}
	<-holder.Done()
	if err := holder.Err(); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("holder's Err() = %v, want ErrNotHeld", err)
	}
}

func TestMemLockFailNext(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	l, _ := newMemLock(t)

	l.FailNext(boom)
	if _, err := l.TryLock(ctx); !errors.Is(err, boom) {
		t.Fatalf("TryLock after FailNext = %v, want boom", err)
	}
	if l.Grants() != 0 {
		t.Fatal("a failed acquire granted the lock")
	}
	lease := mustTryLock(t, l)

	l.FailNext(boom)
	if err := lease.Renew(ctx); !errors.Is(err, boom) {
		t.Fatalf("Renew after FailNext = %v, want boom", err)
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("a failed renewal ended the lease: %v", err)
	}

	l.FailNext(boom)
	if err := lease.Unlock(ctx); !errors.Is(err, boom) {
		t.Fatalf("Unlock after FailNext = %v, want boom", err)
	}
	if _, held := l.Holder(); !held {
		t.Fatal("a failed release freed the lock")
	}

	l.FailNext(boom)
	l.FailNext(nil)
	if _, err := l.TryLock(ctx); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock after FailNext(nil) = %v, want ErrLocked", err)
	}
}

func TestMemLockFailNextEndsLock(t *testing.T) {
	boom := errors.New("boom")
	l, clock := newMemLock(t)
	mustTryLock(t, l)
	res := locktest.LockAsync(context.Background(), l)
	waitTimers(t, clock, 2)

	l.FailNext(boom)
	l.ExpireNow()
	if r := locktest.Receive(t, res); !errors.Is(r.Err, boom) {
		t.Fatalf("Lock = %v, want the injected failure", r.Err)
	}
}

func TestMemLockCancel(t *testing.T) {
	l, clock := newMemLock(t)
	mustTryLock(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	res := locktest.LockAsync(ctx, l)
	waitTimers(t, clock, 2)

	cancel()
	if r := locktest.Receive(t, res); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("Lock after cancel = %v, want context.Canceled", r.Err)
	}
	if _, err := l.TryLock(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("TryLock with a cancelled ctx = %v, want context.Canceled", err)
	}
	if n := clock.Pending(); n != 1 {
		t.Errorf("%d timers pending after Lock returned, want only the holder's", n)
	}
}

func TestMemLockWaitBudget(t *testing.T) {
	l, clock := newMemLock(t, locks.WithWaitBudget(100*time.Millisecond))
	mustTryLock(t, l)
	res := locktest.LockAsync(context.Background(), l)
	waitTimers(t, clock, 3) // the holder's deadline, the budget, the expiry

	clock.Advance(99 * time.Millisecond)
	select {
	case r := <-res:
		t.Fatalf("Lock returned %v before its budget ran out", r.Err)
	default:
	}
	clock.Advance(time.Millisecond)
	if r := locktest.Receive(t, res); !errors.Is(r.Err, locks.ErrWaitBudget) {
		t.Fatalf("Lock = %v, want ErrWaitBudget", r.Err)
	}
}

func TestMemLockObservesAcquired(t *testing.T) {
	var got []locks.Event
	obs := locks.ObserverFunc(func(_ context.Context, e locks.Event) { got = append(got, e) })
	l, _ := newMemLock(t, locks.WithObserver(obs))
	mustTryLock(t, l)
	want := locks.Event{Point: locks.PointAcquired, Name: "orders", Token: 1, Fenced: true}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("observed %+v, want [%+v]", got, want)
	}
}

func TestNewMemLockRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []locks.Option
		want error
	}{
		{"", nil, locks.ErrInvalidName},
		{"bad\nname", nil, locks.ErrInvalidName},
		{"orders", []locks.Option{locks.WithTTL(0)}, locks.ErrInvalidTTL},
		{"orders", []locks.Option{locks.WithClock(nil)}, locks.ErrInvalidOption},
		{"orders", []locks.Option{locks.WithWaitBudget(-time.Second)}, locks.ErrInvalidOption},
	} {
		l, err := fakes.NewMemLock(tc.name, tc.opts...)
		if !errors.Is(err, tc.want) || l != nil {
			t.Errorf("NewMemLock(%q) = %v, %v; want nil, %v", tc.name, l, err, tc.want)
		}
	}
}
