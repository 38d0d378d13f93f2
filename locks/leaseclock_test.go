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

// heldTimers keeps the AfterFunc callbacks a fakes.Clock's Advance passes
// instead of running them, so a test can look at a lease after its
// deadline and before its expiry timer has run.
type heldTimers struct {
	mu sync.Mutex
	fs []func()
}

func holdTimers(clock *fakes.Clock) *heldTimers {
	h := &heldTimers{}
	clock.SetDispatch(func(fs []func()) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.fs = append(h.fs, fs...)
	})
	return h
}

// heldLease returns an unwatched lease granted at epoch on a clock whose
// callbacks are held, with its backend.
func heldLease(t *testing.T, opts ...locks.Option) (*fakes.Clock, *heldTimers, *scriptedOps, *locks.ManagedLease) {
	clock := fakes.NewClock(epoch)
	timers := holdTimers(clock)
	ops := newOps()
	o := options(t, clock, append([]locks.Option{locks.WithWatchdog(false)}, opts...)...)
	return clock, timers, ops, locks.NewLease(locks.LeaseSpec{Name: "x", Start: epoch}, ops, o)
}

// run runs the callbacks held so far, one after the other.
func (h *heldTimers) run() int {
	h.mu.Lock()
	fs := h.fs
	h.fs = nil
	h.mu.Unlock()
	for _, f := range fs {
		f()
	}
	return len(fs)
}

// TestErrAtDeadlineBeforeTimer: a lease is over the instant its clock
// reaches the deadline, whether or not the expiry timer has run: Err says
// so, Done is closed by then, and the timer running later changes nothing.
func TestErrAtDeadlineBeforeTimer(t *testing.T) {
	clock, timers, _, l := heldLease(t)
	clock.Advance(l.Deadline().Sub(epoch) - time.Nanosecond)
	if err := l.Err(); err != nil || isClosed(l.Done()) {
		t.Fatalf("a nanosecond before the deadline: Err = %v, Done closed = %v", err, isClosed(l.Done()))
	}
	clock.Advance(time.Nanosecond)
	err := l.Err()
	if !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("at the deadline, expiry timer not run: Err = %v, want ErrLeaseExpired", err)
	}
	if !isClosed(l.Done()) {
		t.Fatal("Err reported the lease expired but Done is open")
	}
	if n := timers.run(); n != 1 {
		t.Fatalf("%d callbacks held, want the expiry timer's", n)
	}
	if again := l.Err(); again != err {
		t.Fatalf("Err changed after the timer ran: %v, then %v", err, again)
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("Unlock = %v, want ErrLeaseExpired", err)
	}
}

// TestErrAtMaxHoldBeforeTimer: at the max hold's end Err wraps ErrMaxHold
// at once, and the release the max hold sends goes out.
func TestErrAtMaxHoldBeforeTimer(t *testing.T) {
	clock, timers, ops, l := heldLease(t, locks.WithMaxHold(time.Second))
	clock.Advance(time.Second)
	if err := l.Err(); !errors.Is(err, locks.ErrMaxHold) || !isClosed(l.Done()) {
		t.Fatalf("at the max hold's end: Err = %v, Done closed = %v; want ErrMaxHold and closed", err, isClosed(l.Done()))
	}
	timers.run()
	if err := l.Unlock(context.Background()); !errors.Is(err, locks.ErrMaxHold) {
		t.Fatalf("Unlock = %v, want ErrMaxHold", err)
	}
	if _, releases := ops.count(); releases != 1 {
		t.Fatalf("%d releases, want the max hold's one", releases)
	}
}

// TestRenewAfterDeadlineDoesNotRevive: a renewal sent before the deadline
// whose answer comes back after Err reported the lease expired extends
// nothing: Err stays non-nil, Done closed, the deadline where it was.
func TestRenewAfterDeadlineDoesNotRevive(t *testing.T) {
	clock, timers, ops, l := heldLease(t)
	deadline := l.Deadline()
	clock.Advance(deadline.Sub(epoch) - time.Millisecond)
	var seen error
	ops.mu.Lock()
	ops.onRenew = func() { // the answer is delayed past the deadline
		clock.Advance(time.Millisecond)
		seen = l.Err()
	}
	ops.mu.Unlock()
	_ = l.Renew(context.Background())
	if !errors.Is(seen, locks.ErrLeaseExpired) {
		t.Fatalf("Err at the deadline, the renewal in flight = %v, want ErrLeaseExpired", seen)
	}
	if !l.Deadline().Equal(deadline) {
		t.Fatalf("Deadline moved to %v by a renewal answered after Err reported the lease expired", l.Deadline())
	}
	timers.run()
	if err := l.Err(); err != seen || !isClosed(l.Done()) {
		t.Fatalf("after the late renewal: Err = %v (was %v), Done closed = %v", err, seen, isClosed(l.Done()))
	}
	_ = l.Unlock(context.Background())
}

// TestHoldErrAtDeadline: a re-entrant hold reports its acquisition's end
// at the deadline too, and its Done is closed with it.
func TestHoldErrAtDeadline(t *testing.T) {
	clock := fakes.NewClock(epoch)
	timers := holdTimers(clock)
	o := options(t, clock, locks.WithWatchdog(false), locks.WithOwner("job"))
	r := locks.NewReentry(o)
	acquire := func(context.Context) (locks.Lease, error) {
		return locks.NewLease(locks.LeaseSpec{Name: "x", Start: clock.Now()}, newOps(), o), nil
	}
	h, err := r.Acquire(context.Background(), false, acquire)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(h.Deadline().Sub(epoch))
	if err := h.Err(); !errors.Is(err, locks.ErrLeaseExpired) || !isClosed(h.Done()) {
		t.Fatalf("hold at the deadline: Err = %v, Done closed = %v", err, isClosed(h.Done()))
	}
	timers.run()
	_ = h.Unlock(context.Background())
}
