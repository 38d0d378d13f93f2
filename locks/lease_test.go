package locks_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// scriptedOps is a backend whose answers the test sets.
type scriptedOps struct {
	mu       sync.Mutex
	renewErr error
	renews   int
	releases int
	renewed  chan struct{}
	// releaseErr is what Release returns; onRelease, if set, is called
	// first.
	releaseErr error
	onRelease  func()
	// onRenew, if set, is called as Renew begins.
	onRenew func()
}

func newOps() *scriptedOps { return &scriptedOps{renewed: make(chan struct{}, 100)} }

func (s *scriptedOps) Renew(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onRenew != nil {
		s.onRenew()
	}
	s.renews++
	s.renewed <- struct{}{}
	return s.renewErr
}

func (s *scriptedOps) Release(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onRelease != nil {
		s.onRelease()
	}
	s.releases++
	return s.releaseErr
}

func (s *scriptedOps) count() (renews, releases int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renews, s.releases
}

func (s *scriptedOps) set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renewErr = err
}

func options(t *testing.T, clock locks.Clock, opts ...locks.Option) locks.Options {
	t.Helper()
	o, err := locks.Resolve("test:", append([]locks.Option{locks.WithClock(clock), locks.WithTTL(3 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestLeaseDeadlineAndExpiry(t *testing.T) {
	clock := fakes.NewClock(epoch)
	ops := newOps()
	l := locks.NewLease(locks.LeaseSpec{Name: "x", Token: 7, Fenced: true, Start: epoch},
		ops, options(t, clock, locks.WithWatchdog(false)))
	want := epoch.Add(3*time.Second - locks.Drift(3*time.Second))
	if got := l.Deadline(); !got.Equal(want) {
		t.Fatalf("Deadline = %v, want %v", got, want)
	}
	if tok, ok := l.Token(); tok != 7 || !ok {
		t.Fatalf("Token = %v, %v", tok, ok)
	}
	clock.Advance(want.Sub(epoch) - time.Nanosecond)
	select {
	case <-l.Done():
		t.Fatal("Done closed before the deadline")
	default:
	}
	clock.Advance(time.Nanosecond)
	<-l.Done()
	if !errors.Is(l.Err(), locks.ErrLeaseExpired) {
		t.Fatalf("Err = %v", l.Err())
	}
	if err := l.Renew(context.Background()); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("Renew after expiry = %v", err)
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("Unlock after expiry = %v", err)
	}
	if ops.releases != 1 {
		t.Fatal("an expired lease's Unlock must still send the owner-checked release")
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, locks.ErrReleased) {
		t.Fatalf("second Unlock = %v", err)
	}
}

func TestLeaseAlreadyExpiredAtGrant(t *testing.T) {
	clock := fakes.NewClock(epoch.Add(time.Hour))
	l := locks.NewLease(locks.LeaseSpec{Name: "x", Start: epoch}, newOps(), options(t, clock))
	<-l.Done()
	if !errors.Is(l.Err(), locks.ErrLeaseExpired) {
		t.Fatalf("Err = %v", l.Err())
	}
}

// A lease that expired before it could be handed over is reported at
// PointGrantedTooLate with its token, released even on a cancelled
// context, and its error returned; a valid one is left alone.
func TestGiveBackIfLate(t *testing.T) {
	var mu sync.Mutex
	var seen []locks.Event
	obs := locks.ObserverFunc(func(_ context.Context, e locks.Event) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, e)
	})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	late := newOps()
	clock := fakes.NewClock(epoch.Add(time.Hour))
	l := locks.NewLease(locks.LeaseSpec{Name: "x", Token: 7, Fenced: true, Start: epoch}, late,
		options(t, clock, locks.WithObserver(obs), locks.WithWatchdog(false)))
	if err := l.GiveBackIfLate(cancelled); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("GiveBackIfLate of an expired lease = %v, want ErrLeaseExpired", err)
	}
	if _, releases := late.count(); releases != 1 {
		t.Fatalf("%d releases of the lease given back, want 1", releases)
	}
	mu.Lock()
	first := seen
	seen = nil
	mu.Unlock()
	if len(first) == 0 || first[0].Point != locks.PointGrantedTooLate || first[0].Token != 7 || !first[0].Fenced || first[0].Name != "x" {
		t.Fatalf("events %+v, want PointGrantedTooLate with token 7 first", first)
	}

	valid := newOps()
	l = locks.NewLease(locks.LeaseSpec{Name: "x", Token: 8, Fenced: true, Start: clock.Now()}, valid,
		options(t, clock, locks.WithObserver(obs), locks.WithWatchdog(false)))
	if err := l.GiveBackIfLate(context.Background()); err != nil {
		t.Fatalf("GiveBackIfLate of a valid lease = %v", err)
	}
	if _, releases := valid.count(); releases != 0 || l.Err() != nil {
		t.Fatalf("a valid lease was given back: %d releases, Err %v", releases, l.Err())
	}
	mu.Lock()
	n := len(seen)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d events for a valid lease", n)
	}
	_ = l.Unlock(context.Background())
}

func TestWatchdogRenewsAtThirdOfTTL(t *testing.T) {
	clock := fakes.NewClock(epoch)
	ops := newOps()
	l := locks.NewLease(locks.LeaseSpec{Name: "x", Start: epoch}, ops, options(t, clock))
	for i := 1; i <= 5; i++ {
		clock.Advance(time.Second - time.Millisecond)
		select {
		case <-ops.renewed:
			t.Fatal("renewed before TTL/3")
		default:
		}
		clock.Advance(time.Millisecond)
		<-ops.renewed
		want := epoch.Add(time.Duration(i)*time.Second + 3*time.Second - locks.Drift(3*time.Second))
		waitFor(t, func() bool { return l.Deadline().Equal(want) })
		// Advance only once the watchdog has re-armed (its timer and the
		// expiry timer pending): it reads the clock, then arms a timer
		// relative to what it read, and an Advance in between would move
		// time past the moment it aims at.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := clock.WaitTimers(ctx, 2)
		cancel()
		if err != nil {
			t.Fatalf("watchdog did not re-arm after renewal %d: %v", i, err)
		}
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), locks.ErrReleased) {
		t.Fatalf("Err after Unlock = %v", l.Err())
	}
}

func TestWatchdogLossClosesDone(t *testing.T) {
	clock := fakes.NewClock(epoch)
	ops := newOps()
	ops.set(locks.ErrNotHeld)
	l := locks.NewLease(locks.LeaseSpec{Name: "x", Start: epoch}, ops, options(t, clock))
	clock.Advance(time.Second)
	<-l.Done()
	if !errors.Is(l.Err(), locks.ErrNotHeld) {
		t.Fatalf("Err = %v, want ErrNotHeld", l.Err())
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Unlock of a lost lease = %v", err)
	}
}

// TestWatchdogGivesUpInTime: transient errors are retried, but once the lease
// cannot be renewed before it expires Done closes with ErrLeaseExpired, not
// later.
func TestWatchdogGivesUpInTime(t *testing.T) {
	clock := fakes.NewClock(epoch)
	ops := newOps()
	ops.set(errors.New("connection refused"))
	o := options(t, clock)
	l := locks.NewLease(locks.LeaseSpec{Name: "x", Start: epoch}, ops, o)
	deadline := l.Deadline()
	finished := func() bool {
		select {
		case <-l.Done():
			return true
		default:
			return false
		}
	}
	for !finished() {
		// Wait for the retry timer (beside the expiry timer) or the end.
		waitFor(t, func() bool { return finished() || clock.Pending() >= 2 })
		if !finished() {
			clock.Advance(50 * time.Millisecond)
		}
	}
	if !errors.Is(l.Err(), locks.ErrLeaseExpired) {
		t.Fatalf("Err = %v", l.Err())
	}
	if left := deadline.Sub(clock.Now()); left < 0 || left > o.RequestTimeout+50*time.Millisecond {
		t.Fatalf("gave up %v before the deadline; want within a request timeout (%v)", left, o.RequestTimeout)
	}
	if ops.renews < 2 {
		t.Fatalf("only %d renewal attempts: transient errors must be retried", ops.renews)
	}
	_ = l.Unlock(context.Background())
}

func TestObserverPoints(t *testing.T) {
	clock := fakes.NewClock(epoch)
	var mu sync.Mutex
	var seen []locks.Point
	obs := locks.ObserverFunc(func(_ context.Context, e locks.Event) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, e.Point)
	})
	l := locks.NewLease(locks.LeaseSpec{Name: "x", Start: epoch}, newOps(),
		options(t, clock, locks.WithObserver(obs), locks.WithWatchdog(false)))
	if err := l.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != locks.PointBeforeRenew || seen[1] != locks.PointBeforeUnlock {
		t.Fatalf("points = %v", seen)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestUnlockCancelledKeepsExpiry(t *testing.T) {
	clock := fakes.NewClock(epoch)
	ops := newOps()
	l := locks.NewLease(locks.LeaseSpec{Name: "x", Start: epoch}, ops, options(t, clock, locks.WithWatchdog(false)))
	clock.Advance(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Unlock(ctx); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("Unlock(cancelled) of an expired lease = %v, want ErrLeaseExpired", err)
	}
}
