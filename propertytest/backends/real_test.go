package backends

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// TestRedisLockOnAMiniredisAddress smoke-tests RedisLockOn's real-server
// path (redisfake.At, no environment variable) against a miniredis
// reached by its address: a lock taken and released, the run's keys
// deleted at its end.
func TestRedisLockOnAMiniredisAddress(t *testing.T) {
	r := redisfake.New(t, redisfake.ForceMiniredis())
	t.Run("run", func(t *testing.T) {
		be, err := RedisLockOn(r.Addr())(t)
		if err != nil {
			t.Fatal(err)
		}
		smokeLock(t, be)
	})
	if keys := r.Miniredis().Keys(); len(keys) != 0 {
		t.Fatalf("keys left after the run: %v", keys)
	}
}

// TestRedlockOnMiniredisAddresses does the same for RedlockOn
// (redisfake.NodesAt) on three miniredis servers, and checks that fewer
// than three are refused.
func TestRedlockOnMiniredisAddresses(t *testing.T) {
	g := redisfake.NewCluster(t, 3, redisfake.ForceMiniredis())
	addrs := []string{g.Node(0).Addr(), g.Node(1).Addr(), g.Node(2).Addr()}
	if _, err := RedlockOn(addrs[:2])(t); err == nil {
		t.Fatal("RedlockOn accepted two servers")
	}
	t.Run("run", func(t *testing.T) {
		be, err := RedlockOn(addrs)(t)
		if err != nil {
			t.Fatal(err)
		}
		smokeLock(t, be)
	})
	for i, n := range g.Nodes() {
		if keys := n.Miniredis().Keys(); len(keys) != 0 {
			t.Fatalf("keys left on node %d after the run: %v", i, keys)
		}
	}
}

// On a real Redis (LOCKPROOF_REDIS_ADDR, as CI's real-server step sets),
// the suite runs in real time and finds nothing wrong with redislock.
func TestRedisLockOnRealServer(t *testing.T) {
	addr := os.Getenv(redisfake.EnvAddr)
	if addr == "" {
		t.Skipf("no real Redis: set %s to run this test", redisfake.EnvAddr)
	}
	suitemain.SetChecks(t, 3)
	rep := propertytest.Run(t, RedisLockOn(addr), propertytest.Options{TTL: 200 * time.Millisecond})
	checkedEveryRun(t, rep, propertytest.DeadlockFreedom)
}

// On real Redis servers (LOCKPROOF_REDIS_ADDRS), the suite runs Redlock in
// real time and finds nothing wrong with it.
func TestRedlockOnRealServer(t *testing.T) {
	env := os.Getenv(redisfake.EnvAddrs)
	if env == "" {
		t.Skipf("no real Redis servers: set %s to run this test", redisfake.EnvAddrs)
	}
	suitemain.SetChecks(t, 3)
	rep := propertytest.Run(t, RedlockOn(strings.Split(env, ",")), propertytest.Options{TTL: 200 * time.Millisecond,
		Claims: []propertytest.FaultKind{propertytest.FaultCrash}})
	checkedEveryRun(t, rep, propertytest.DeadlockFreedom)
}
