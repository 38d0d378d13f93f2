package locks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
)

// TestMaxHoldEndsWatchedLease: the watchdog renews a 3 s lease at 1, 2 and
// 3 s; the renewal at 3 s reaches the 5 s bound, so none follows, and at
// 5 s Done closes with ErrMaxHold and one release is sent. Renew and
// Unlock are refused after it, and Unlock sends no second release.
func TestMaxHoldEndsWatchedLease(t *testing.T) {
	clock := fakes.NewClock(epoch)
	ops := newOps()
	l := locks.NewLease(locks.LeaseSpec{Name: "x", Start: epoch}, ops,
		options(t, clock, locks.WithMaxHold(5*time.Second)))
	maxEnd := epoch.Add(5 * time.Second)
	for i := 1; i <= 3; i++ {
		clock.Advance(time.Second)
		<-ops.renewed
		want := epoch.Add(time.Duration(i+3)*time.Second - locks.Drift(3*time.Second))
		if want.After(maxEnd) {
			want = maxEnd
		}
		waitFor(t, func() bool { return l.Deadline().Equal(want) })
		timers := 1 // the expiry timer
		if i < 3 {
			timers = 2 // and the next renewal
		}
		waitFor(t, func() bool { return clock.Pending() == timers })
	}
	if got := l.Deadline(); !got.Equal(maxEnd) {
		t.Fatalf("Deadline = %v, want the max hold's end %v", got, maxEnd)
	}
	clock.Advance(2*time.Second - time.Nanosecond)
	select {
	case <-l.Done():
		t.Fatalf("Done closed before the max hold: %v", l.Err())
	default:
	}
	clock.Advance(time.Nanosecond)
	<-l.Done()
	if !errors.Is(l.Err(), locks.ErrMaxHold) || errors.Is(l.Err(), locks.ErrLeaseExpired) {
		t.Fatalf("Err = %v, want ErrMaxHold only", l.Err())
	}
	if err := l.Renew(context.Background()); !errors.Is(err, locks.ErrMaxHold) {
		t.Fatalf("Renew after the max hold = %v", err)
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, locks.ErrMaxHold) {
		t.Fatalf("Unlock after the max hold = %v", err)
	}
	if renews, releases := ops.count(); renews != 3 || releases != 1 {
		t.Fatalf("%d renewals and %d releases; want 3 and 1", renews, releases)
	}
}

// TestMaxHoldShorterThanTTL: an explicit Renew before the bound does not
// extend past it, Done closes before the release is sent, and a failed
// release at the max hold is sent again by Unlock.
func TestMaxHoldShorterThanTTL(t *testing.T) {
	clock := fakes.NewClock(epoch)
	ops := newOps()
	ops.releaseErr = errors.New("connection reset")
	l := locks.NewLease(locks.LeaseSpec{Name: "x", Start: epoch}, ops,
		options(t, clock, locks.WithMaxHold(time.Second), locks.WithWatchdog(false)))
	closedFirst := make(chan bool, 2)
	ops.onRelease = func() {
		select {
		case <-l.Done():
			closedFirst <- true
		default:
			closedFirst <- false
		}
	}
	clock.Advance(500 * time.Millisecond)
	if err := l.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := l.Deadline(), epoch.Add(time.Second); !got.Equal(want) {
		t.Fatalf("Deadline after Renew = %v, want %v", got, want)
	}
	clock.Advance(500 * time.Millisecond)
	if !<-closedFirst {
		t.Fatal("the release was sent before Done closed")
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, locks.ErrMaxHold) {
		t.Fatalf("Unlock = %v", err)
	}
	if _, releases := ops.count(); releases != 2 {
		t.Fatalf("%d releases; want the failed one and Unlock's", releases)
	}
}

// TestMaxHoldPassedAtGrant: a grant whose answer arrives after the bound
// is finished at once with ErrMaxHold.
func TestMaxHoldPassedAtGrant(t *testing.T) {
	clock := fakes.NewClock(epoch.Add(time.Second))
	ops := newOps()
	l := locks.NewLease(locks.LeaseSpec{Name: "x", Start: epoch}, ops,
		options(t, clock, locks.WithMaxHold(time.Second)))
	<-l.Done()
	if !errors.Is(l.Err(), locks.ErrMaxHold) {
		t.Fatalf("Err = %v", l.Err())
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, locks.ErrMaxHold) {
		t.Fatalf("Unlock = %v", err)
	}
	if _, releases := ops.count(); releases != 1 {
		t.Fatalf("%d releases, want 1", releases)
	}
}

// TestWithoutMaxHoldExpires: without the option the same lease expires by
// its TTL with ErrLeaseExpired, not ErrMaxHold, and sends no release.
func TestWithoutMaxHoldExpires(t *testing.T) {
	clock := fakes.NewClock(epoch)
	ops := newOps()
	l := locks.NewLease(locks.LeaseSpec{Name: "x", Start: epoch}, ops, options(t, clock, locks.WithWatchdog(false)))
	clock.Advance(3 * time.Second)
	<-l.Done()
	if errors.Is(l.Err(), locks.ErrMaxHold) || !errors.Is(l.Err(), locks.ErrLeaseExpired) {
		t.Fatalf("Err = %v", l.Err())
	}
	if _, releases := ops.count(); releases != 0 {
		t.Fatalf("an expired lease sent %d releases by itself", releases)
	}
	_ = l.Unlock(context.Background())
}

func TestMaxHoldValidated(t *testing.T) {
	for _, c := range []struct {
		d  time.Duration
		ok bool
	}{{0, true}, {-time.Second, false}, {299 * time.Millisecond, false}, {300 * time.Millisecond, true}, {time.Hour, true}} {
		o, err := locks.Resolve("p:", locks.WithTTL(3*time.Second), locks.WithMaxHold(c.d))
		if c.ok && (err != nil || o.MaxHold != c.d) {
			t.Errorf("WithMaxHold(%v): %v, MaxHold %v", c.d, err, o.MaxHold)
		}
		if !c.ok && !errors.Is(err, locks.ErrInvalidOption) {
			t.Errorf("WithMaxHold(%v) = %v, want ErrInvalidOption", c.d, err)
		}
	}
}
