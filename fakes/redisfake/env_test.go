package redisfake_test

import (
	"os"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/redisfake"
)

func TestRedisFollowsTheEnvironment(t *testing.T) {
	s := redisfake.New(t)
	if want := os.Getenv(redisfake.EnvAddr) != ""; s.Real() != want {
		t.Fatalf("Real() = %v with %s=%q", s.Real(), redisfake.EnvAddr, os.Getenv(redisfake.EnvAddr))
	}
}

func TestRedisUnreachableServerFailsClearly(t *testing.T) {
	t.Setenv(redisfake.EnvAddr, faketest.ClosedAddr)
	msg := faketest.FatalMessage(t, func(tb testing.TB) { redisfake.New(tb) })
	if !strings.Contains(msg, redisfake.EnvAddr) || !strings.Contains(msg, "PING") {
		t.Fatalf("New with an unreachable server failed with %q", msg)
	}
}

func TestForceMiniredisIgnoresTheEnvironment(t *testing.T) {
	t.Setenv(redisfake.EnvAddr, faketest.ClosedAddr)
	t.Setenv(redisfake.EnvAddrs, faketest.ClosedAddr)
	if s := redisfake.New(t, redisfake.ForceMiniredis()); s.Real() {
		t.Error("New(ForceMiniredis()) uses the real server")
	}
	if g := redisfake.NewCluster(t, 2, redisfake.ForceMiniredis()); g.Node(0).Real() {
		t.Error("NewCluster(ForceMiniredis()) uses real servers")
	}
}

func TestRedisClusterIgnoresTheSingleServer(t *testing.T) {
	t.Setenv(redisfake.EnvAddr, faketest.ClosedAddr)
	t.Setenv(redisfake.EnvAddrs, "")
	if g := redisfake.NewCluster(t, 2); g.Node(0).Real() {
		t.Errorf("NewCluster uses %s, which names one server", redisfake.EnvAddr)
	}
}

func TestRedisClusterRealServers(t *testing.T) {
	for _, tc := range []struct{ addrs, want string }{
		{faketest.ClosedAddr, "skip: redisfake.NewCluster: 2 independent Redis servers needed, 1 given"},
		{faketest.ClosedAddr + "," + faketest.ClosedAddr, "twice"},
	} {
		t.Setenv(redisfake.EnvAddrs, tc.addrs)
		msg := faketest.FatalMessage(t, func(tb testing.TB) { redisfake.NewCluster(tb, 2) })
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s=%q: NewCluster(2) ended with %q, want %q", redisfake.EnvAddrs, tc.addrs, msg, tc.want)
		}
	}
}
