package locks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
)

// holdingGate holds every request until release is closed, and tells of
// each arrival on arrived.
type holdingGate struct {
	arrived chan string
	release chan struct{}
}

func (g holdingGate) Request(_ context.Context, what string) func() {
	g.arrived <- what
	<-g.release
	return nil
}

// ended waits a little for ctx to end and returns its error (nil if it
// has not ended).
func ended(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Second):
		return nil
	}
}

func TestRequestContextWithoutGateIsWithTimeout(t *testing.T) {
	ctx, cancel := locks.RequestContext(context.Background(), time.Hour)
	defer cancel()
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < 59*time.Minute {
		t.Fatalf("deadline %v %v, want one an hour away", dl, ok)
	}
	short, cancel2 := locks.RequestContext(context.Background(), time.Millisecond)
	defer cancel2()
	if err := ended(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want DeadlineExceeded", err)
	}
}

func TestRequestContextDoesNotCountTimeHeldAtTheGate(t *testing.T) {
	clock := fakes.NewClock(epoch)
	g := holdingGate{arrived: make(chan string, 2), release: make(chan struct{})}
	parent := locks.WithGate(context.Background(), g)
	ctx, cancel := locks.HeldContext(parent, 10*time.Second, clock)
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a held request context reports a deadline")
	}
	clock.Advance(4 * time.Second) // 4 s of the 10 run before the request

	// Two requests sent together (a fan-out) and held: the time they wait
	// at the gate does not count, however long it is.
	derived, cancelDerived := context.WithCancel(ctx)
	defer cancelDerived()
	dones := make(chan struct{}, 2)
	for _, what := range []string{"a", "b"} {
		go func() { locks.GateRequest(derived, what)(); dones <- struct{}{} }()
	}
	<-g.arrived
	<-g.arrived
	clock.Advance(time.Hour)
	if err := ctx.Err(); err != nil {
		t.Fatalf("expired while its requests were held: %v", err)
	}
	close(g.release)
	<-dones
	<-dones

	clock.Advance(5 * time.Second) // 9 s counted
	select {
	case <-ctx.Done():
		t.Fatalf("ended after 9 s of its 10 counted: %v", ctx.Err())
	case <-time.After(20 * time.Millisecond):
	}
	clock.Advance(time.Second + time.Nanosecond)
	if err := ended(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err after 10 s counted: %v, want DeadlineExceeded", err)
	}
	// A context derived from it says the same (a client's own request
	// context, an http.Request's).
	if err := ended(derived); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("derived context's err %v, want DeadlineExceeded", err)
	}
}

func TestRequestContextEndsWithItsParentAndCancel(t *testing.T) {
	clock := fakes.NewClock(epoch)
	g := holdingGate{arrived: make(chan string, 1), release: make(chan struct{})}
	parent, cancelParent := context.WithCancel(locks.WithGate(context.Background(), g))
	ctx, cancel := locks.HeldContext(parent, time.Second, clock)
	defer cancel()
	if ctx.Value(struct{}{}) != nil || locks.GateOf(ctx) == nil {
		t.Fatal("values are not the parent's")
	}
	cancelParent()
	// At once, without waiting for Done: a request its gate lets go just
	// after its operation was cancelled must not be sent.
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err right after the parent's cancel %v, want Canceled", err)
	}
	if err := ended(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err after the parent's cancel %v, want Canceled", err)
	}

	// A parent that ended before: the context ends at once.
	done, cancelDone := context.WithCancel(locks.WithGate(context.Background(), g))
	cancelDone()
	late, cancelLate := locks.HeldContext(done, time.Second, clock)
	defer cancelLate()
	if err := ended(late); !errors.Is(err, context.Canceled) {
		t.Fatalf("err of a context made from an ended parent %v, want Canceled", err)
	}
	// No time at all: it ends at once too.
	none, cancelNone := locks.HeldContext(locks.WithGate(context.Background(), g), 0, clock)
	defer cancelNone()
	if err := ended(none); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err of a context with no time %v, want DeadlineExceeded", err)
	}

	own, cancelOwn := locks.HeldContext(locks.WithGate(context.Background(), g), time.Second, clock)
	cancelOwn()
	cancelOwn() // twice is harmless
	if err := ended(own); !errors.Is(err, context.Canceled) {
		t.Fatalf("err after cancel %v, want Canceled", err)
	}
	clock.Advance(time.Minute)
	if err := own.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("err changed to %v after its time ran out", err)
	}
}

func TestRequestContextNestedHoldsBoth(t *testing.T) {
	clock := fakes.NewClock(epoch)
	g := holdingGate{arrived: make(chan string, 1), release: make(chan struct{})}
	outer, cancelOuter := locks.HeldContext(locks.WithGate(context.Background(), g), 2*time.Second, clock)
	defer cancelOuter()
	inner, cancelInner := locks.HeldContext(outer, time.Second, clock)
	defer cancelInner()
	done := make(chan struct{})
	go func() { locks.GateRequest(inner, "x")(); close(done) }()
	<-g.arrived
	clock.Advance(time.Hour)
	close(g.release)
	<-done
	if outer.Err() != nil || inner.Err() != nil {
		t.Fatalf("a hold counted: outer %v, inner %v", outer.Err(), inner.Err())
	}
}

// clockedGate lets every request go at once and times them on clock.
type clockedGate struct{ clock locks.Clock }

func (clockedGate) Request(context.Context, string) func() { return nil }
func (g clockedGate) RequestClock() locks.Clock            { return g.clock }

func TestRequestContextCountsOnTheGatesClock(t *testing.T) {
	clock := fakes.NewClock(epoch)
	parent := locks.WithGate(context.Background(), clockedGate{clock})
	ctx, cancel := locks.RequestContext(parent, time.Millisecond)
	defer cancel()
	locks.GateRequest(ctx, "a")()
	// Far more wall time than its bound: the gate's clock has not moved.
	select {
	case <-ctx.Done():
		t.Fatalf("ended on wall time under a gate with a clock: %v", ctx.Err())
	case <-time.After(50 * time.Millisecond):
	}
	clock.Advance(time.Millisecond)
	if err := ended(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err after its bound on the gate's clock: %v, want DeadlineExceeded", err)
	}

	// A gate that names no clock leaves the bound on wall time.
	wall, cancelWall := locks.RequestContext(locks.WithGate(context.Background(), clockedGate{}), time.Millisecond)
	defer cancelWall()
	if err := ended(wall); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err under a gate without a clock: %v, want DeadlineExceeded on wall time", err)
	}
}
