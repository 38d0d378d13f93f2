package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// MaxHold checks locks.WithMaxHold on a backend. The lockers run on the
// manual clock, which advance moves (with the backend's time, where the
// backend has a manual one). lockers[0] has locks.WithMaxHold(maxHold) and
// a TTL above 3·maxHold, so that no renewal is due before the bound (the
// watchdog may be on); lockers[1:] are other clients of the same lock, each with an owner of its own (none for a
// backend that is its own client, as fakes.MemLock). It checks that a lease
// held through the bound ends at it: Deadline never past it, Renew
// accepted before it and refused after it with ErrMaxHold, Done closed and
// Err wrapping ErrMaxHold, Unlock reporting ErrMaxHold; and that the lock
// was released: it is taken again, with a higher fencing token.
func MaxHold(t testing.TB, clock locks.Clock, advance func(time.Duration), maxHold time.Duration, lockers ...locks.Locker) {
	t.Helper()
	ctx := context.Background()
	lease, err := lockers[0].TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	bound := clock.Now().Add(maxHold)
	for _, other := range lockers[1:] {
		if l, err := other.TryLock(ctx); !errors.Is(err, locks.ErrLocked) {
			unlockQuietly(l)
			t.Fatalf("another client's TryLock while held = %v, want ErrLocked", err)
		}
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("Renew before the max hold: %v", err)
	}
	if d := lease.Deadline(); d.After(bound) {
		t.Fatalf("Deadline %v is past the max hold's end %v", d, bound)
	}
	advance(maxHold)
	if err := lease.Renew(ctx); !errors.Is(err, locks.ErrMaxHold) {
		t.Fatalf("Renew at the max hold = %v, want ErrMaxHold", err)
	}
	select {
	case <-lease.Done():
	default:
		t.Fatal("Done still open at the max hold")
	}
	if !errors.Is(lease.Err(), locks.ErrMaxHold) {
		t.Fatalf("Err = %v, want ErrMaxHold", lease.Err())
	}
	if err := lease.Unlock(ctx); !errors.Is(err, locks.ErrMaxHold) {
		t.Fatalf("Unlock after the max hold = %v, want ErrMaxHold", err)
	}
	next, err := lockers[len(lockers)-1].TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the max hold: %v (the lock was not released)", err)
	}
	defer unlockQuietly(next)
	tokenAbove(t, next, lease)
}

// Reentrant checks locks.WithOwner on a backend. owner is a Locker with
// WithOwner(id); others are optional: others[0] a Locker of the same lock
// on another client, with no owner or another one, and others[1] a Locker on
// yet another client with the same id, as a restarted process would make.
// It checks that the owner's TryLock and Lock re-enter its acquisition (one
// fencing token), that each hold unlocks once and the lock stays held until
// the last hold is unlocked, that the others are refused meanwhile, and that
// the lock is then free: the restarted owner gets a new acquisition with a
// higher token, re-enters it in turn, and keeps the first Locker out.
func Reentrant(t testing.TB, owner locks.Locker, others ...locks.Locker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), LockTimeout)
	defer cancel()
	holds := enter(t, owner, 3)
	refused(t, others...)
	if err := holds[0].Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the first of 3 holds: %v", err)
	}
	select {
	case <-holds[0].Done():
	default:
		t.Fatal("an unlocked hold's Done is open")
	}
	if err := holds[0].Unlock(ctx); !errors.Is(err, locks.ErrReleased) {
		t.Fatalf("second Unlock of one hold = %v, want ErrReleased", err)
	}
	select {
	case <-holds[1].Done():
		t.Fatalf("unlocking one hold ended another: %v", holds[1].Err())
	default:
	}
	if err := holds[1].Renew(ctx); err != nil {
		t.Fatalf("Renew of a remaining hold: %v", err)
	}
	refused(t, others...)
	if err := holds[1].Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the second of 3 holds: %v", err)
	}
	refused(t, others...)
	if err := holds[2].Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the last hold: %v", err)
	}
	next := owner
	if len(others) > 1 {
		next = others[1]
	}
	again := enter(t, next, 2)
	tokenAbove(t, again[0], holds[2])
	if len(others) > 1 {
		refused(t, owner)
	}
	for _, h := range again {
		if err := h.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
}

// enter takes n holds through l (TryLock, then Lock) and checks that they
// share one fencing token.
func enter(t testing.TB, l locks.Locker, n int) []locks.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), LockTimeout)
	defer cancel()
	var holds []locks.Lease
	for i := range n {
		take := l.TryLock
		if i == n-1 {
			take = l.Lock
		}
		h, err := take(ctx)
		if err != nil {
			for _, h := range holds {
				unlockQuietly(h)
			}
			t.Fatalf("hold %d of the owner: %v", i+1, err)
		}
		holds = append(holds, h)
		if t0, _ := holds[0].Token(); i > 0 {
			if ti, _ := h.Token(); ti != t0 {
				t.Fatalf("hold %d has token %v, the first %v: a re-entry keeps the token", i+1, ti, t0)
			}
		}
	}
	return holds
}

// refused checks that each of lockers is refused the lock.
func refused(t testing.TB, lockers ...locks.Locker) {
	t.Helper()
	for i, l := range lockers {
		if got, err := l.TryLock(context.Background()); !errors.Is(err, locks.ErrLocked) {
			unlockQuietly(got)
			t.Fatalf("locker %d's TryLock while the owner holds = %v, want ErrLocked", i, err)
		}
	}
}

// tokenAbove checks that next's token is above prev's, when both are safe.
func tokenAbove(t testing.TB, next, prev locks.Lease) {
	t.Helper()
	tn, okn := next.Token()
	tp, okp := prev.Token()
	if okn && okp && tn <= tp {
		t.Fatalf("token %v after token %v: not a new acquisition", tn, tp)
	}
}

func unlockQuietly(l locks.Lease) {
	if l != nil {
		_ = l.Unlock(context.Background())
	}
}
