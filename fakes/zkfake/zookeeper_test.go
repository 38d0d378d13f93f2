package zkfake_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks"
)

var zkACL = zk.WorldACL(zk.PermAll)

func TestZooKeeperFollowsTheEnvironment(t *testing.T) {
	z := zkfake.New(t)
	if want := os.Getenv(zkfake.EnvAddr) != ""; z.Real() != want {
		t.Fatalf("Real() = %v with %s=%q", z.Real(), zkfake.EnvAddr, os.Getenv(zkfake.EnvAddr))
	}
	c, _, err := z.Connect(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(z.Prefix(), nil, 0, zkACL); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(z.Prefix()+"/a", []byte("v"), zk.FlagEphemeral, zkACL); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(z.Prefix(), "/lockproof-test-") {
		t.Errorf("prefix %q", z.Prefix())
	}
	if err := z.AdvanceTime(time.Second); !errors.Is(err, zkfake.ErrNotManual) {
		t.Errorf("AdvanceTime in real time = %v", err)
	}
	msg := faketest.FatalMessage(t, func(tb testing.TB) { zkfake.New(tb).Advance(time.Second) })
	if !strings.Contains(msg, "zkfake.ManualTime") {
		t.Errorf("Advance in real time failed with %q", msg)
	}
}

func TestZooKeeperUnreachableServerFailsClearly(t *testing.T) {
	t.Setenv(zkfake.EnvAddr, faketest.ClosedAddr)
	msg := faketest.FatalMessage(t, func(tb testing.TB) { zkfake.New(tb) })
	if !strings.Contains(msg, zkfake.EnvAddr) || !strings.Contains(msg, "refused") {
		t.Fatalf("New with an unreachable server failed with %q", msg)
	}
}

func TestZooKeeperManualTimeExpiresSessions(t *testing.T) {
	t.Setenv(zkfake.EnvAddr, faketest.ClosedAddr)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	z := zkfake.New(t, zkfake.ForceMinizk(), zkfake.ManualTime(start))
	if z.Real() || z.Minizk() == nil {
		t.Fatal("ForceMinizk did not start minizk")
	}
	if got := z.Clock().Now(); !got.Equal(start) {
		t.Fatalf("clock reads %v", got)
	}
	c, events, err := z.Connect(4 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(z.Prefix(), nil, zk.FlagEphemeral, zkACL); err != nil {
		t.Fatal(err)
	}
	z.Advance(4 * time.Second)
	if ids := z.Minizk().Sessions(); slices.Contains(ids, c.SessionID()) {
		t.Fatalf("session %#x outlived its 4s timeout", c.SessionID())
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-events:
			if e.State == zk.StateExpired {
				return
			}
		case <-timeout:
			t.Fatal("the client was not told of the expiry")
		}
	}
}

func TestStartZooKeeperWithoutATest(t *testing.T) {
	z, err := zkfake.Start(zkfake.TickTime(100 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := z.Connect(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	timeout, err := z.Minizk().SessionTimeout(c.SessionID())
	if err != nil || timeout != 2*time.Second {
		t.Fatalf("session timeout %v (%v): want 20 ticks of 100ms", timeout, err)
	}
	if opts := z.LockOptions(); len(opts) != 2 {
		t.Fatalf("%d lock options", len(opts))
	}
	if _, ok := z.Clock().(locks.SystemClock); !ok {
		t.Fatalf("clock %T in real time", z.Clock())
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, _, err := z.Connect(time.Second); err == nil {
		t.Fatal("Connect after Close succeeded")
	}
}

// A ConnectManual client in manual time keeps its session only by its
// requests (no ping), and reports each one's opcode.
func TestZooKeeperConnectManual(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	z := zkfake.New(t, zkfake.ForceMinizk(), zkfake.ManualTime(start), zkfake.TickTime(time.Second))
	ops := make(chan int32, 16)
	c, err := z.ConnectManual(z.Addr(), 10*time.Second, func(op int32) {
		select {
		case ops <- op:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	id := c.SessionID()
	for range 3 {
		z.Advance(6 * time.Second) // within the timeout of the last request
		if _, _, err := c.Exists("/"); err != nil {
			t.Fatal(err)
		}
		if op := <-ops; op != 3 {
			t.Fatalf("onRequest saw opcode %d for exists", op)
		}
	}
	if got := z.Minizk().Sessions(); !slices.Contains(got, id) {
		t.Fatalf("session %#x gone after requests within its timeout: %v", id, got)
	}
	z.Advance(10 * time.Second)
	if got := z.Minizk().Sessions(); slices.Contains(got, id) {
		t.Fatalf("session %#x alive after its timeout without a request: %v", id, got)
	}
}
