package etcdlock

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// TestExclusionThroughFence: 32 goroutines in 4 "processes" (each its own
// client and Locker) × 25 acquisitions (queue) or 10 (naive), each a
// read-modify-write through a Fence. No update may be lost and no access
// refused. Every acquisition is a few writes the embedded etcd commits to
// disk: the 100 of queue mode, which CI makes (LOCKPROOF_DEEP=1, .ci/run
// steps 2 and 6), took 26 s of go test ./... under load average 12.
func TestExclusionThroughFence(t *testing.T) {
	queueRounds := 25
	if os.Getenv("LOCKPROOF_DEEP") == "1" {
		queueRounds = 100
	}
	for _, mode := range []struct {
		name   string
		rounds int
		make   func(*clientv3.Client, string, ...locks.Option) (*Locker, error)
	}{
		{"queue", queueRounds, New},
		{"naive", 10, NewNaive},
	} {
		t.Run(mode.name, func(t *testing.T) {
			s := etcdfake.New(t)
			const procs, perProc = 4, 8
			var fence locks.Fence[int]
			var inside atomic.Int32
			var wg sync.WaitGroup
			errs := make(chan error, procs*perProc)
			for range procs {
				l, err := mode.make(s.NewClient(), "counter", s.LockOptions()...)
				if err != nil {
					t.Fatal(err)
				}
				for range perProc {
					wg.Go(func() { errs <- locktest.FencedIncrements(l, &fence, &inside, mode.rounds, 2*time.Minute) })
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if got, want := fence.Value(), procs*perProc*mode.rounds; got != want {
				t.Fatalf("counter = %d, want %d: lost updates", got, want)
			}
			if st := fence.Stats(); st.Rejected != 0 {
				t.Fatalf("fence rejected %d stale accesses", st.Rejected)
			}
		})
	}
}

// TestHolderLeaseRevoked: the holder "crashes" (its lease is revoked on the
// server); the next waiter in line gets the lock, the old holder's Done
// closes with ErrNotHeld when its watchdog next renews, and its fenced write
// is refused.
func TestHolderLeaseRevoked(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx := context.Background()
	holder := newLocker(t, s, "job", locks.WithTTL(time.Second))
	waiter := newLocker(t, s, "job", locks.WithTTL(time.Second))
	var fence locks.Fence[string]

	old := mustLock(t, holder)
	oldTok := token(t, old)
	if err := fence.Write(oldTok, "old"); err != nil {
		t.Fatal(err)
	}
	got := locktest.LockAsync(ctx, waiter)
	kvs := waitContenders(t, s.Client(), holder, 2)
	if locks.Token(kvs[0].CreateRevision) != oldTok {
		t.Fatalf("first contender has revision %d, holder's token is %v", kvs[0].CreateRevision, oldTok)
	}
	if err := s.RevokeLease(ctx, clientv3.LeaseID(kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}

	r := locktest.Receive(t, got)
	if r.Err != nil {
		t.Fatalf("waiter: %v", r.Err)
	}
	defer r.Lease.Unlock(ctx)
	newTok := token(t, r.Lease)
	if newTok <= oldTok {
		t.Fatalf("new token %v not above the old %v", newTok, oldTok)
	}
	if _, err := fence.Read(newTok); err != nil {
		t.Fatal(err)
	}
	locktest.Closed(t, "the revoked holder's Done", old.Done())
	if err := old.Err(); !errors.Is(err, locks.ErrNotHeld) || !errors.Is(err, ErrSessionLost) {
		t.Fatalf("old holder's Err = %v, want ErrNotHeld and ErrSessionLost", err)
	}
	if err := fence.Write(oldTok, "stale"); !errors.Is(err, locks.ErrStaleToken) {
		t.Fatalf("stale write: %v, want ErrStaleToken", err)
	}
	if err := old.Unlock(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("unlock after loss: %v, want ErrNotHeld", err)
	}
	if err := r.Lease.Renew(ctx); err != nil {
		t.Fatalf("new holder lost the lock to a stale unlock: %v", err)
	}
}

// TestWaiterLeaseRevoked: a waiter whose lease is revoked while it waits gets
// an error from Lock and never holds; found by its renewal (TTL 1 s) or by
// the re-check after its predecessor goes (TTL 60 s: no renewal comes within
// the test's deadline).
func TestWaiterLeaseRevoked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		ttl           time.Duration
		holderUnlocks bool
	}{
		{"found by renewal", time.Second, false},
		{"found by re-check", time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := etcdfake.New(t)
			ctx := context.Background()
			holder := newLocker(t, s, "job", locks.WithTTL(tc.ttl))
			waiter := newLocker(t, s, "job", locks.WithTTL(tc.ttl))
			lease := mustLock(t, holder)
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			got := locktest.LockAsync(wctx, waiter)
			kvs := waitContenders(t, s.Client(), holder, 2)
			if err := s.RevokeLease(ctx, clientv3.LeaseID(kvs[1].Lease)); err != nil {
				t.Fatal(err)
			}
			if tc.holderUnlocks {
				if err := lease.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			r := locktest.Receive(t, got)
			if r.Err == nil {
				r.Lease.Unlock(ctx)
				t.Fatal("a waiter whose lease was revoked got the lock")
			}
			if !errors.Is(r.Err, ErrSessionLost) || !errors.Is(r.Err, locks.ErrNotHeld) {
				t.Fatalf("waiter: %v, want ErrSessionLost and ErrNotHeld", r.Err)
			}
			if !tc.holderUnlocks {
				if err := lease.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if kvs, _ := contenders(t, s.Client(), holder); len(kvs) != 0 {
				t.Fatalf("%d keys left after both left", len(kvs))
			}
			next, err := holder.TryLock(ctx)
			if err != nil {
				t.Fatalf("lock not free after the holder left: %v", err)
			}
			_ = next.Unlock(ctx)
		})
	}
}

// TestPredecessorGivesUp: the waiter ahead cancels; the one behind now
// waits on the holder and gets the lock when the holder unlocks.
func TestPredecessorGivesUp(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx := context.Background()
	a, b, c := newLocker(t, s, "res"), newLocker(t, s, "res"), newLocker(t, s, "res")
	held := mustLock(t, a)
	bctx, cancelB := context.WithCancel(ctx)
	defer cancelB()
	gotB := locktest.LockAsync(bctx, b)
	waitContenders(t, s.Client(), a, 2)
	gotC := locktest.LockAsync(ctx, c)
	waitContenders(t, s.Client(), a, 3)
	cancelB()
	if r := locktest.Receive(t, gotB); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", r.Err)
	}
	waitContenders(t, s.Client(), a, 2)
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := locktest.Receive(t, gotC)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if token(t, r.Lease) <= token(t, held) {
		t.Fatal("token did not grow")
	}
	_ = r.Lease.Unlock(ctx)
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	c := s.Client()
	cases := []struct {
		name string
		err  error
		make func() (*Locker, error)
	}{
		{"nil client", locks.ErrNilClient, func() (*Locker, error) { return New(nil, "x") }},
		{"nil client naive", locks.ErrNilClient, func() (*Locker, error) { return NewNaive(nil, "x") }},
		{"empty name", locks.ErrInvalidName, func() (*Locker, error) { return New(c, "") }},
		{"control char", locks.ErrInvalidName, func() (*Locker, error) { return New(c, "a\nb") }},
		{"zero TTL", locks.ErrInvalidTTL, func() (*Locker, error) { return New(c, "x", locks.WithTTL(0)) }},
		{"negative TTL", locks.ErrInvalidTTL, func() (*Locker, error) { return New(c, "x", locks.WithTTL(-time.Second)) }},
		{"sub-second TTL", locks.ErrInvalidTTL, func() (*Locker, error) {
			return New(c, "x", locks.WithTTL(999*time.Millisecond))
		}},
		{"nil clock", locks.ErrInvalidOption, func() (*Locker, error) { return New(c, "x", locks.WithClock(nil)) }},
		{"negative budget", locks.ErrInvalidOption, func() (*Locker, error) {
			return New(c, "x", locks.WithWaitBudget(-1))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.make()
			if !errors.Is(err, tc.err) || l != nil {
				t.Fatalf("got (%v, %v), want error %v", l, err, tc.err)
			}
		})
	}
	l, err := New(c, "x", locks.WithTTL(1500*time.Millisecond))
	if err != nil || l.ttlSec != 2 {
		t.Fatalf("TTL 1.5s: (%v, %v), want a lease of 2 s", l, err)
	}
}

func TestDoubleUnlockAndRenewAfterUnlock(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx := context.Background()
	l := newLocker(t, s, "res")
	lease := mustLock(t, l)
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	locktest.UnlockOnce(t, lease)
	if !errors.Is(lease.Err(), locks.ErrReleased) {
		t.Fatalf("Err after unlock = %v", lease.Err())
	}
}

// TestForeignReleaseCannotTouch: the owner-checked release with another
// acquisition's revision leaves the holder's key alone.
func TestForeignReleaseCannotTouch(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx := context.Background()
	l := newLocker(t, s, "res")
	lease := mustLock(t, l)
	kvs, _ := contenders(t, s.Client(), l)
	foreign := &leaseOps{l: l, s: &session{}, key: string(kvs[0].Key), rev: kvs[0].CreateRevision - 1}
	if err := foreign.Release(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("foreign release: %v, want ErrNotHeld", err)
	}
	if err := foreign.Renew(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("foreign renew: %v, want ErrNotHeld", err)
	}
	if _, err := l.TryLock(ctx); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock after a foreign release: %v, want ErrLocked", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestUnlockAfterTakeover: once the key is gone (deleted behind the
// holder's back), Renew says ErrNotHeld and closes Done, and Unlock does not
// free the next holder's lock.
func TestUnlockAfterTakeover(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx := context.Background()
	l := newLocker(t, s, "res", locks.WithWatchdog(false))
	old := mustLock(t, l)
	kvs, _ := contenders(t, s.Client(), l)
	if _, err := s.Client().Delete(ctx, string(kvs[0].Key)); err != nil {
		t.Fatal(err)
	}
	next := mustLock(t, l)
	if err := old.Renew(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("renew of a taken-over lease: %v, want ErrNotHeld", err)
	}
	locktest.Closed(t, "the taken-over lease's Done", old.Done())
	if err := old.Unlock(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("unlock of a taken-over lease: %v, want ErrNotHeld", err)
	}
	if err := next.Renew(ctx); err != nil {
		t.Fatalf("the stale unlock released the new holder: %v", err)
	}
	_ = next.Unlock(ctx)
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx := context.Background()
	l := newLocker(t, s, "res")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Lock(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock: %v", err)
	}
	if _, err := l.TryLock(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("TryLock: %v", err)
	}
	// Cancelled while waiting: the waiter's key goes (its lease revoked; in
	// the background when the cancel caught its enqueue unanswered), and
	// the holder's unlock leaves the lock free.
	holder := mustLock(t, l)
	wctx, cancel := context.WithCancel(ctx)
	got := locktest.LockAsync(wctx, l)
	first := waitContenders(t, s.Client(), l, 2)[0] // by create revision: the holder's
	cancel()
	if r := locktest.Receive(t, got); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("waiting Lock: %v", r.Err)
	}
	if kvs := waitContenders(t, s.Client(), l, 1); string(kvs[0].Key) != string(first.Key) {
		t.Fatalf("the key left after the waiter went is %s, not the holder's %s", kvs[0].Key, first.Key)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatalf("lock not free after the only waiter left: %v", err)
	}
	_ = lease.Unlock(ctx)
}

// TestContextDeadlineWhileWaiting: a deadline ends the wait with
// context.DeadlineExceeded, in about the time given.
func TestContextDeadlineWhileWaiting(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx := context.Background()
	l := newLocker(t, s, "res")
	holder := mustLock(t, l)
	defer holder.Unlock(ctx)
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := l.Lock(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Lock returned %v after a deadline of 200ms", d)
	}
}

func TestWaitBudget(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx := context.Background()
	l := newLocker(t, s, "res", locks.WithWaitBudget(100*time.Millisecond))
	holder := mustLock(t, l)
	defer holder.Unlock(ctx)
	if _, err := l.Lock(ctx); !errors.Is(err, locks.ErrWaitBudget) {
		t.Fatalf("Lock: %v, want ErrWaitBudget", err)
	}
	if kvs, _ := contenders(t, s.Client(), l); len(kvs) != 1 {
		t.Fatalf("%d keys after the waiter gave up, want the holder's only", len(kvs))
	}
}

// TestTryLock: TryLock fails with ErrLocked while held or while anyone
// waits, and leaves no key behind; tokens grow.
func TestTryLock(t *testing.T) {
	t.Parallel()
	for _, make := range []func(*clientv3.Client, string, ...locks.Option) (*Locker, error){New, NewNaive} {
		s := etcdfake.New(t)
		ctx := context.Background()
		l, err := make(s.Client(), "res", s.LockOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		lease, err := l.TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.TryLock(ctx); !errors.Is(err, locks.ErrLocked) {
			t.Fatalf("second TryLock: %v, want ErrLocked", err)
		}
		resp, err := s.Client().Get(ctx, s.Prefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count != 1 {
			t.Fatalf("keys after a failed TryLock: %v, %v; want the holder's only", resp, err)
		}
		tok := token(t, lease)
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		again, err := l.TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if token(t, again) <= tok {
			t.Fatal("fencing token did not grow")
		}
		_ = again.Unlock(ctx)
	}
}

// TestNamesDoNotOverlap: the keys of lock "a/b" are not contenders of lock
// "a".
func TestNamesDoNotOverlap(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx := context.Background()
	ab := mustLock(t, newLocker(t, s, "a/b"))
	defer ab.Unlock(ctx)
	a, err := newLocker(t, s, "a").TryLock(ctx)
	if err != nil {
		t.Fatalf("lock a while a/b is held: %v", err)
	}
	_ = a.Unlock(ctx)
	if k := newLocker(t, s, "a/b%").Key(); k != s.Prefix()+"a%2Fb%25/" {
		t.Fatalf("Key() = %q", k)
	}
}

// TestKeyIsWhereTheLockLives: a held lock is one key under the fake's
// prefix, Key + the hex id of the holder's lease, and the fake's
// ExpireLock, which finds the holder through the same layout, ends the
// lease. A change of the layout on either side fails here.
func TestKeyIsWhereTheLockLives(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	l := newLocker(t, s, "a/b%")
	if want := Key(s.Prefix(), "a/b%"); l.Key() != want {
		t.Fatalf("Locker.Key() = %q, Key = %q", l.Key(), want)
	}
	lease := mustLock(t, l)
	resp, err := s.Client().Get(ctx, s.Prefix(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("%d keys under the prefix, want the holder's alone", len(resp.Kvs))
	}
	kv := resp.Kvs[0]
	if want := Key(s.Prefix(), "a/b%") + strconv.FormatInt(kv.Lease, 16); string(kv.Key) != want {
		t.Fatalf("the holder's key is %q, want %q", kv.Key, want)
	}
	locktest.ExpiredFromOutside(t, lease, func(ctx context.Context) error { return s.ExpireLock(ctx, "a/b%") }, fakes.ErrNoHolder)
}

// TestWatchdogOffExpires: without the watchdog a crashed holder's lease
// expires on the server one TTL after its last renewal, and the waiter gets
// the lock.
func TestWatchdogOffExpires(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx := context.Background()
	crashed := newLocker(t, s, "job", locks.WithTTL(time.Second), locks.WithWatchdog(false))
	waiter := newLocker(t, s, "job", locks.WithTTL(time.Second))
	old := mustLock(t, crashed)
	got := locktest.LockAsync(ctx, waiter)
	locktest.Closed(t, "the unrenewed lease's Done", old.Done())
	if !errors.Is(old.Err(), locks.ErrLeaseExpired) {
		t.Fatalf("Err = %v, want ErrLeaseExpired", old.Err())
	}
	r := locktest.Receive(t, got)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if !r.Lease.Deadline().After(old.Deadline()) {
		t.Fatal("the new lease ends no later than the expired one")
	}
	_ = r.Lease.Unlock(ctx)
}
