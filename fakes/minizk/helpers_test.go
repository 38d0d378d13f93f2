package minizk_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/minizk"
	"github.com/lockproof/lockproof/internal/zkrace"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// start starts a server on a manual clock, closed at cleanup.
func start(t testing.TB, opts ...minizk.Option) (*minizk.Server, *manualClock) {
	t.Helper()
	clock := newManualClock(epoch)
	s, err := minizk.Start(append([]minizk.Option{minizk.WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, clock
}

// quiet is a zk.Logger that drops go-zookeeper's connection chatter.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// client connects go-zookeeper to addr with a 10 s session timeout and
// waits for the session; the connection is closed at cleanup. The events
// channel is drained into the returned one, which buffers 256.
func client(t testing.TB, addr string) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	return clientTimeout(t, addr, 10*time.Second)
}

// clientTimeout is client with the given session timeout.
func clientTimeout(t testing.TB, addr string, timeout time.Duration) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	return clientDialing(t, addr, timeout, nil)
}

// clientDialing is clientTimeout whose connections come from dial (nil:
// go-zookeeper's own, TCP).
func clientDialing(t testing.TB, addr string, timeout time.Duration, dial zk.Dialer) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	events := make(chan zk.Event, 256)
	c, _, err := zk.Connect([]string{addr}, timeout, zk.WithLogger(quiet{}),
		zk.WithEventCallback(func(e zk.Event) {
			select {
			case events <- e:
			default:
			}
		}),
		func(c *zk.Conn) {
			if dial != nil {
				zk.WithDialer(dial)(c)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	waitState(t, events, zk.StateHasSession)
	zkrace.Settle(10 * time.Second)
	return c, events
}

// waitState waits (wall clock, bounded) for a session event with state.
func waitState(t testing.TB, events <-chan zk.Event, state zk.State) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-events:
			if e.Type == zk.EventSession && e.State == state {
				return
			}
		case <-timeout:
			t.Fatalf("no %v event within 10s", state)
		}
	}
}

// waitEvent waits for a watch's event.
func waitEvent(t testing.TB, ch <-chan zk.Event) zk.Event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
		return zk.Event{}
	}
}

// waitFor waits (wall clock, bounded) for cond on s.
func waitFor(t testing.TB, s *minizk.Server, what string, cond func(minizk.View) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitFor(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

var acl = zk.WorldACL(zk.PermAll)
