package fakes

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
)

// EnvRedisAddrs names the environment variable listing real, independent
// Redis servers for RedisCluster: comma-separated host:port, at least as many
// as the test asks for. EnvRedisAddr alone does not apply to RedisCluster:
// one server cannot stand for independent nodes.
const EnvRedisAddrs = "LOCKPROOF_REDIS_ADDRS"

// RedisNodes is a group of independent Redis servers, as Redlock uses: no
// replication, no shared keys. All nodes share one Prefix and, in manual
// mode, one Clock. It is not a Redis Cluster (no slots).
type RedisNodes struct {
	t      testing.TB
	prefix string
	clock  *Clock // nil in real-time mode
	nodes  []*RedisServer
}

// RedisCluster starts n independent nodes for t: miniredis servers, or the
// first n real servers of EnvRedisAddrs unless ForceMiniredis is given. It
// fails the test if n < 1 or a node cannot be started, and skips it when
// EnvRedisAddrs lists fewer than n servers.
func RedisCluster(t testing.TB, n int, opts ...RedisOption) *RedisNodes {
	t.Helper()
	if n < 1 {
		t.Fatalf("fakes: RedisCluster needs at least one node, got %d", n)
	}
	cfg := newRedisConfig(opts)
	addrs := make([]string, n) // "" starts a miniredis
	if env := os.Getenv(EnvRedisAddrs); env != "" && !cfg.forceMini {
		copy(addrs, realAddrs(t, env, n))
	}
	g := &RedisNodes{t: t, prefix: newPrefix(), clock: cfg.newClock()}
	for i, addr := range addrs {
		g.nodes = append(g.nodes, newNode(t, addr, g.prefix, g.clock, true, i))
	}
	return g
}

// realAddrs parses EnvRedisAddrs and returns its first n addresses.
func realAddrs(t testing.TB, env string, n int) []string {
	t.Helper()
	var addrs []string
	seen := map[string]bool{}
	for a := range strings.SplitSeq(env, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if seen[a] {
			t.Fatalf("fakes: %s lists %s twice: nodes must be independent servers", EnvRedisAddrs, a)
		}
		seen[a] = true
		addrs = append(addrs, a)
	}
	if len(addrs) < n {
		t.Skipf("fakes: the test needs %d independent Redis servers, %s lists %d", n, EnvRedisAddrs, len(addrs))
	}
	return addrs[:n]
}

// Nodes returns the nodes, in order.
func (g *RedisNodes) Nodes() []*RedisServer { return g.nodes }

// Node returns node i, failing the test if there is none.
func (g *RedisNodes) Node(i int) *RedisServer {
	g.t.Helper()
	if i < 0 || i >= len(g.nodes) {
		g.t.Fatalf("fakes: no node %d in a group of %d", i, len(g.nodes))
	}
	return g.nodes[i]
}

// Clients returns each node's own client, in node order.
func (g *RedisNodes) Clients() []redis.UniversalClient {
	cs := make([]redis.UniversalClient, len(g.nodes))
	for i, n := range g.nodes {
		cs[i] = n.Client()
	}
	return cs
}

// NewClients returns a fresh client per node, in node order, closed at
// cleanup: the view of a second process. Node i's client passes its
// commands through the locks.Gate of their context as "redis node <i>: ..."
// (see RedisGateHook), so the names of Redlock's parallel requests differ by
// node and by nothing that changes from run to run.
func (g *RedisNodes) NewClients() []redis.UniversalClient {
	cs := make([]redis.UniversalClient, len(g.nodes))
	for i, n := range g.nodes {
		cs[i] = n.NewClient()
	}
	return cs
}

// Prefix returns the key prefix shared by all nodes.
func (g *RedisNodes) Prefix() string { return g.prefix }

// Clock returns the clock shared by all nodes: locks.SystemClock in real-time
// mode, one manual *Clock in manual mode.
func (g *RedisNodes) Clock() locks.Clock { return clockOf(g.clock) }

// LockOptions returns the options a test passes to a lock constructor so the
// lock uses the group's Prefix and Clock.
func (g *RedisNodes) LockOptions() []locks.Option { return lockOptions(g.prefix, g.clock) }

// Advance moves time forward by d on every node, stopped ones included, then
// on the shared Clock; manual mode only. See RedisServer.Advance.
func (g *RedisNodes) Advance(d time.Duration) {
	g.t.Helper()
	advance(g.t, g.clock, g.nodes, d)
}

// Stop stops node i. See RedisServer.Stop.
func (g *RedisNodes) Stop(i int) {
	g.t.Helper()
	g.Node(i).Stop()
}

// Restart restarts node i, with its data or empty. See RedisServer.Restart.
func (g *RedisNodes) Restart(i int, keepData bool) {
	g.t.Helper()
	g.Node(i).Restart(keepData)
}

// JumpNode moves node i's clock forward by d, alone: the node's TTLs run
// down by d (keys that reach zero expire) while the other nodes and the
// shared Clock stay where they are. This is the clock jump that breaks
// Redlock. Manual mode on miniredis, or any real server (whose key TTLs are
// shortened by d).
func (g *RedisNodes) JumpNode(i int, d time.Duration) {
	g.t.Helper()
	if d < 0 {
		g.t.Fatalf("fakes: JumpNode(%d, %v): a jump goes forward", i, d)
	}
	n := g.Node(i)
	if n.mini != nil {
		n.mini.FastForward(d)
		return
	}
	if err := n.advanceReal(d); err != nil {
		g.t.Fatalf("fakes: JumpNode(%d, %v): %v", i, d, err)
	}
}

// ExpireLock deletes the key of lock name (see RedisServer.ExpireLock) on
// every node; it fails only when no node held it, or a node failed.
func (g *RedisNodes) ExpireLock(ctx context.Context, name string) error {
	found := false
	for i, n := range g.nodes {
		ok, err := n.expireKey(ctx, name)
		if err != nil {
			return fmt.Errorf("fakes: expire lock %q on node %d: %w", name, i, err)
		}
		found = found || ok
	}
	if !found {
		return fmt.Errorf("fakes: expire lock %q: no node holds it", name)
	}
	return nil
}
