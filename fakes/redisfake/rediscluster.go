package redisfake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/fakeutil"
	"github.com/lockproof/lockproof/locks"
)

// EnvAddrs names the environment variable listing real, independent
// Redis servers for RedisCluster: comma-separated host:port, at least as many
// as the test asks for. EnvAddr alone does not apply to RedisCluster:
// one server cannot stand for independent nodes.
const EnvAddrs = "LOCKPROOF_REDIS_ADDRS"

// Nodes is a group of independent Redis servers, as Redlock uses: no
// replication, no shared keys. All nodes share one Prefix and, in manual
// mode, one Clock. It is not a Redis Cluster (no slots). Build it with
// StartCluster, or RedisCluster for a test; Close closes every node.
type Nodes struct {
	owner  fakeutil.Owner
	prefix string
	clock  *fakes.Clock // nil in real-time mode
	nodes  []*Server
}

// StartCluster starts n independent nodes for a program that has no
// test: miniredis servers, or the first n real servers given by
// NodesAt (unless ForceMiniredis). It returns an error if n < 1,
// NodesAt lists an address twice or fewer than n, or a node cannot be
// started or reached. Close stops them.
func StartCluster(n int, opts ...Option) (*Nodes, error) {
	if n < 1 {
		return nil, fmt.Errorf("redisfake: a Redis cluster needs at least one node, got %d", n)
	}
	cfg := newRedisConfig(opts)
	addrs := make([]string, n) // "" starts a miniredis
	if len(cfg.addrs) > 0 {
		real, err := realAddrs(cfg.addrs, n)
		if err != nil {
			return nil, err
		}
		copy(addrs, real)
	}
	g := &Nodes{prefix: newPrefix(), clock: cfg.newClock()}
	for i, addr := range addrs {
		node, err := newNode(addr, g.prefix, g.clock, true, i)
		if err != nil {
			_ = g.Close()
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		g.nodes = append(g.nodes, node)
	}
	return g, nil
}

// NewCluster starts n independent nodes for t with StartCluster:
// miniredis servers, or the first n real servers of EnvAddrs (read
// here, as a NodesAt before opts) unless ForceMiniredis is given. It
// fails the test if n < 1 or a node cannot be started, skips it when
// EnvAddrs lists fewer than n servers, and closes the nodes at t's
// cleanup.
func NewCluster(t testing.TB, n int, opts ...Option) *Nodes {
	t.Helper()
	return fakeutil.ForTest(t, "redisfake.NewCluster", EnvAddrs, opts,
		func(v string) Option { return NodesAt(fakeutil.ListOf(v)...) },
		func(o []Option) string { return strings.Join(newRedisConfig(o).addrs, ",") },
		func(o ...Option) (*Nodes, error) { return StartCluster(n, o...) }, (*Nodes).own)
}

// own makes tb the owner of the group and of every node.
func (g *Nodes) own(tb testing.TB) {
	g.owner.Own(tb)
	for _, node := range g.nodes {
		node.owner.Own(tb)
	}
}

// Close closes every node (see Server.Close) and returns their
// errors, joined.
func (g *Nodes) Close() error {
	var errs []error
	for i, n := range g.nodes {
		if err := n.Close(); err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// realAddrs checks the addresses of real servers (no address twice, at
// least n) and returns the first n.
func realAddrs(addrs []string, n int) ([]string, error) {
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			return nil, fmt.Errorf("%s is listed twice: nodes must be independent servers", a)
		}
		seen[a] = true
	}
	if len(addrs) < n {
		return nil, fmt.Errorf("%d independent Redis servers needed, %d given: %w", n, len(addrs), fakeutil.ErrTooFewServers)
	}
	return addrs[:n], nil
}

// Nodes returns the nodes, in order.
func (g *Nodes) Nodes() []*Server { return g.nodes }

// Node returns node i, failing the test if there is none.
func (g *Nodes) Node(i int) *Server {
	g.owner.Helper()
	if i < 0 || i >= len(g.nodes) {
		g.owner.Fatalf("redisfake: no node %d in a group of %d", i, len(g.nodes))
	}
	return g.nodes[i]
}

// Clients returns each node's own client, in node order.
func (g *Nodes) Clients() []redis.UniversalClient {
	cs := make([]redis.UniversalClient, len(g.nodes))
	for i, n := range g.nodes {
		cs[i] = n.Client()
	}
	return cs
}

// NewClients returns a fresh client per node, in node order, closed by
// Close: the view of a second process. Node i's client passes its
// commands through the locks.Gate of their context as "redis node <i>: ..."
// (see GateHook), so the names of Redlock's parallel requests differ by
// node and by nothing that changes from run to run.
func (g *Nodes) NewClients() []redis.UniversalClient {
	cs := make([]redis.UniversalClient, len(g.nodes))
	for i, n := range g.nodes {
		cs[i] = n.NewClient()
	}
	return cs
}

// Prefix returns the key prefix shared by all nodes.
func (g *Nodes) Prefix() string { return g.prefix }

// Clock returns the clock shared by all nodes: locks.SystemClock in real-time
// mode, one manual *Clock in manual mode.
func (g *Nodes) Clock() locks.Clock { return fakeutil.ClockOf(g.clock) }

// LockOptions returns the options a test passes to a lock constructor so the
// lock uses the group's Prefix and Clock.
func (g *Nodes) LockOptions() []locks.Option { return fakeutil.LockOptions(g.prefix, g.clock) }

// Advance moves time forward by d on every node, stopped ones included, then
// on the shared Clock; manual mode only. See Server.Advance.
func (g *Nodes) Advance(d time.Duration) {
	g.owner.Helper()
	advance(g.owner, g.clock, g.nodes, d)
}

// Stop stops node i. See Server.Stop.
func (g *Nodes) Stop(i int) {
	g.owner.Helper()
	g.Node(i).Stop()
}

// Restart restarts node i, with its data or empty. See Server.Restart.
func (g *Nodes) Restart(i int, keepData bool) {
	g.owner.Helper()
	g.Node(i).Restart(keepData)
}

// JumpNode moves node i's clock forward by d, alone: the node's TTLs run
// down by d (keys that reach zero expire) while the other nodes and the
// shared Clock stay where they are. This is the clock jump that breaks
// Redlock. Manual mode on miniredis, or any real server (whose key TTLs are
// shortened by d).
func (g *Nodes) JumpNode(i int, d time.Duration) {
	g.owner.Helper()
	if d < 0 {
		g.owner.Fatalf("redisfake: JumpNode(%d, %v): a jump goes forward", i, d)
	}
	n := g.Node(i)
	if n.mini != nil {
		n.mini.FastForward(d)
		return
	}
	if err := n.advanceReal(d); err != nil {
		g.owner.Fatalf("redisfake: JumpNode(%d, %v): %v", i, d, err)
	}
}

// ExpireLock deletes the key of lock name (see Server.ExpireLock) on
// every node; it fails only when a node failed, or when no node held it
// (an error wrapping ErrNoHolder).
func (g *Nodes) ExpireLock(ctx context.Context, name string) error {
	found := false
	for i, n := range g.nodes {
		ok, err := n.expireKey(ctx, name)
		if err != nil {
			return fmt.Errorf("redisfake: expire lock %q on node %d: %w", name, i, err)
		}
		found = found || ok
	}
	if !found {
		return fmt.Errorf("redisfake: expire lock %q: no node holds it: %w", name, fakes.ErrNoHolder)
	}
	return nil
}

// Addr returns the nodes' addresses, joined by commas (the form of
// EnvAddrs).
func (g *Nodes) Addr() string {
	addrs := make([]string, len(g.nodes))
	for i, n := range g.nodes {
		addrs[i] = n.Addr()
	}
	return strings.Join(addrs, ",")
}

// Real reports whether the nodes are real servers.
func (g *Nodes) Real() bool { return len(g.nodes) > 0 && g.nodes[0].Real() }

var (
	_ fakes.Server      = (*Nodes)(nil)
	_ fakes.ManualTimer = (*Nodes)(nil)
	_ fakes.Server      = (*Server)(nil)
	_ fakes.ManualTimer = (*Server)(nil)
)
