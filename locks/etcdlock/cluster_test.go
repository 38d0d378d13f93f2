package etcdlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// TestClusterAvailability: on three members, the lock works with one member
// down, renewal and hand-over to a waiter that waited across the failure
// included; with two down, Lock, TryLock and Unlock fail
// with the context's error within its deadline and nothing hangs; with the
// members back, the lock works again.
func TestClusterAvailability(t *testing.T) {
	t.Parallel()
	s := etcdfake.NewCluster(t, 3)
	if s.Real() {
		t.Skip("needs embedded members to stop")
	}
	ctx := context.Background()
	// A request whose connection was to the stopped member fails over to
	// another one first; under load (CI, -race) that took more than the
	// default request timeout of TTL/10, 200ms.
	opts := []locks.Option{locks.WithTTL(2 * time.Second), locks.WithRequestTimeout(time.Second)}
	a := newLocker(t, s, "res", opts...)
	b := newLocker(t, s, "res", opts...)

	// A member stops while b waits (its watch may go through that member).
	held := mustLock(t, a)
	got := locktest.LockAsync(ctx, b)
	waitContenders(t, s.Client(), a, 2)
	s.Stop(0)
	if err := held.Renew(ctx); err != nil {
		t.Fatalf("renew with one member down: %v", err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("unlock with one member down: %v", err)
	}
	r := locktest.Receive(t, got)
	if r.Err != nil {
		t.Fatalf("hand-over with one member down: %v", r.Err)
	}

	s.Stop(1)
	const deadline = 500 * time.Millisecond
	for _, op := range []struct {
		name string
		do   func(context.Context) error
	}{
		{"Unlock", r.Lease.Unlock},
		{"Lock", func(ctx context.Context) error { _, err := a.Lock(ctx); return err }},
		{"TryLock", func(ctx context.Context) error { _, err := a.TryLock(ctx); return err }},
	} {
		dctx, cancel := context.WithTimeout(ctx, deadline)
		start := time.Now()
		err := op.do(dctx)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s with two of three members down: %v, want context.DeadlineExceeded", op.name, err)
		}
		if took > deadline+time.Second {
			t.Errorf("%s with two of three members down returned after %v, deadline %v", op.name, took, deadline)
		}
	}

	s.Restart(0)
	s.Restart(1)
	lease := mustLock(t, a)
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("unlock with the members back: %v", err)
	}
}
