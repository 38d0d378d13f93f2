package fakes_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
)

var epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func TestClockTimersFireInDeadlineOrder(t *testing.T) {
	c := fakes.NewClock(epoch)
	t3, t1, t2 := c.NewTimer(3*time.Second), c.NewTimer(time.Second), c.NewTimer(2*time.Second)

	c.Advance(1500 * time.Millisecond)
	if got := <-t1.C(); !got.Equal(epoch.Add(time.Second)) {
		t.Fatalf("1s timer fired at %v, want its deadline %v", got, epoch.Add(time.Second))
	}
	if n := c.Pending(); n != 2 {
		t.Fatalf("Pending() = %d after the first deadline, want 2", n)
	}
	assertNotFired(t, t2.C())
	assertNotFired(t, t3.C())

	c.Advance(10 * time.Second)
	for i, tm := range []interface{ C() <-chan time.Time }{t2, t3} {
		want := epoch.Add(time.Duration(i+2) * time.Second)
		if got := <-tm.C(); !got.Equal(want) {
			t.Errorf("timer %d fired at %v, want %v", i+2, got, want)
		}
	}
	if got, want := c.Now(), epoch.Add(11500*time.Millisecond); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v", got, want)
	}
}

func assertNotFired(t *testing.T, ch <-chan time.Time) {
	t.Helper()
	select {
	case at := <-ch:
		t.Fatalf("timer fired early, at %v", at)
	default:
	}
}

func TestClockStop(t *testing.T) {
	c := fakes.NewClock(epoch)
	tm := c.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer = false, want true")
	}
	if tm.Stop() {
		t.Fatal("second Stop = true, want false")
	}
	c.Advance(2 * time.Second)
	assertNotFired(t, tm.C())
	if n := c.Pending(); n != 0 {
		t.Fatalf("Pending() = %d, want 0", n)
	}

	fired := c.NewTimer(time.Second)
	c.Advance(time.Second)
	if fired.Stop() {
		t.Fatal("Stop after firing = true, want false")
	}
}

func TestClockAfterFunc(t *testing.T) {
	c := fakes.NewClock(epoch)
	ran := make(chan struct{})
	stopped := c.AfterFunc(time.Second, func() { t.Error("stopped AfterFunc ran") })
	c.AfterFunc(time.Second, func() { close(ran) })
	stopped.Stop()
	if c.AfterFunc(time.Second, func() {}).C() != nil {
		t.Error("AfterFunc timer has a channel, want nil")
	}

	c.Advance(time.Second)
	<-ran
}

func TestClockNonPositiveDurationFiresAtOnce(t *testing.T) {
	c := fakes.NewClock(epoch)
	if got := <-c.NewTimer(0).C(); !got.Equal(epoch) {
		t.Fatalf("NewTimer(0) fired at %v, want %v", got, epoch)
	}
	ran := make(chan struct{})
	c.AfterFunc(-time.Second, func() { close(ran) })
	<-ran
}

func TestClockWaitTimers(t *testing.T) {
	c := fakes.NewClock(epoch)
	done := make(chan error, 1)
	go func() { done <- c.WaitTimers(context.Background(), 2) }()

	c.NewTimer(time.Second)
	select {
	case err := <-done:
		t.Fatalf("WaitTimers(2) returned %v with one timer armed", err)
	default:
	}
	c.AfterFunc(time.Second, func() {})
	if err := <-done; err != nil {
		t.Fatalf("WaitTimers(2) = %v, want nil", err)
	}
}

func TestClockWaitTimersHonoursContext(t *testing.T) {
	c := fakes.NewClock(epoch)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.WaitTimers(ctx, 1) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitTimers after cancel = %v, want context.Canceled", err)
	}
}

// SetDispatch gets the callbacks one Advance passed, in deadline order
// and, at one deadline, in the order they were armed, once the clock is
// released (a callback may read it); nil puts the goroutines back.
func TestClockSetDispatch(t *testing.T) {
	c := fakes.NewClock(time.Unix(0, 0))
	var got []string
	note := func(s string) func() { return func() { got = append(got, s+" at "+c.Now().Format("05.000")) } }
	c.AfterFunc(3*time.Second, note("c"))
	c.AfterFunc(time.Second, note("a"))
	c.AfterFunc(time.Second, note("b"))
	c.AfterFunc(10*time.Second, note("late"))
	var batches int
	c.SetDispatch(func(fs []func()) {
		batches++
		for _, f := range fs {
			f() // on the caller's goroutine: the clock must not be held
		}
	})
	c.Advance(5 * time.Second)
	want := []string{"a at 05.000", "b at 05.000", "c at 05.000"}
	if batches != 1 || !slices.Equal(got, want) {
		t.Fatalf("%d batches, callbacks %v, want one batch %v", batches, got, want)
	}
	c.SetDispatch(nil)
	done := make(chan struct{})
	c.AfterFunc(time.Second, func() { close(done) })
	c.Advance(time.Second)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the default dispatch did not run the callback")
	}
	if batches != 1 {
		t.Fatalf("the dispatcher was called after SetDispatch(nil)")
	}
}
