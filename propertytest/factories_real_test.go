package propertytest

import (
	"testing"

	"github.com/lockproof/lockproof/fakes/redisfake"
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
