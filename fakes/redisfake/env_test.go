package redisfake_test

import (
	"os"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/fakes"
)

// closedAddr is a loopback address nothing listens on.
const closedAddr = "127.0.0.1:1"

func TestRedisFollowsTheEnvironment(t *testing.T) {
	s := fakes.Redis(t)
	if want := os.Getenv(fakes.EnvRedisAddr) != ""; s.Real() != want {
		t.Fatalf("Real() = %v with %s=%q", s.Real(), fakes.EnvRedisAddr, os.Getenv(fakes.EnvRedisAddr))
	}
}

func TestRedisUnreachableServerFailsClearly(t *testing.T) {
	t.Setenv(fakes.EnvRedisAddr, closedAddr)
	msg := fatalMessage(t, func(tb testing.TB) { fakes.Redis(tb) })
	if !strings.Contains(msg, fakes.EnvRedisAddr) || !strings.Contains(msg, "PING") {
		t.Fatalf("Redis with an unreachable server failed with %q", msg)
	}
}

func TestForceMiniredisIgnoresTheEnvironment(t *testing.T) {
	t.Setenv(fakes.EnvRedisAddr, closedAddr)
	t.Setenv(fakes.EnvRedisAddrs, closedAddr)
	if s := fakes.Redis(t, fakes.ForceMiniredis()); s.Real() {
		t.Error("Redis(ForceMiniredis()) uses the real server")
	}
	if g := fakes.RedisCluster(t, 2, fakes.ForceMiniredis()); g.Node(0).Real() {
		t.Error("RedisCluster(ForceMiniredis()) uses real servers")
	}
}

func TestRedisClusterIgnoresTheSingleServer(t *testing.T) {
	t.Setenv(fakes.EnvRedisAddr, closedAddr)
	t.Setenv(fakes.EnvRedisAddrs, "")
	if g := fakes.RedisCluster(t, 2); g.Node(0).Real() {
		t.Errorf("RedisCluster uses %s, which names one server", fakes.EnvRedisAddr)
	}
}

func TestRedisClusterRealServers(t *testing.T) {
	for _, tc := range []struct{ addrs, want string }{
		{closedAddr, "skip: fakes: 2 independent Redis servers needed, 1 given"},
		{closedAddr + "," + closedAddr, "twice"},
	} {
		t.Setenv(fakes.EnvRedisAddrs, tc.addrs)
		msg := fatalMessage(t, func(tb testing.TB) { fakes.RedisCluster(tb, 2) })
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s=%q: RedisCluster(2) ended with %q, want %q", fakes.EnvRedisAddrs, tc.addrs, msg, tc.want)
		}
	}
}
