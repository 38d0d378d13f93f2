package redisfake_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/redisfake"
)

func TestRedisClusterNodesAreIndependent(t *testing.T) {
	ctx := context.Background()
	g := redisfake.NewCluster(t, 3)
	if n := len(g.Nodes()); n != 3 {
		t.Fatalf("len(Nodes()) = %d, want 3", n)
	}
	clients := g.Clients()
	key := g.Prefix() + "k"
	if err := clients[1].Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET on node 1: %v", err)
	}
	for i, c := range g.NewClients() {
		want := int64(0)
		if i == 1 {
			want = 1
		}
		if got := c.Exists(ctx, key).Val(); got != want {
			t.Errorf("EXISTS on node %d = %d, want %d", i, got, want)
		}
		if p := g.Node(i).Prefix(); p != g.Prefix() {
			t.Errorf("node %d has prefix %q, the group %q", i, p, g.Prefix())
		}
	}
	addrs := map[string]bool{}
	for _, n := range g.Nodes() {
		addrs[n.Addr()] = true
	}
	if len(addrs) != 3 {
		t.Errorf("nodes share addresses: %v", addrs)
	}
}

func TestRedisClusterStopOneNode(t *testing.T) {
	ctx := context.Background()
	g := redisfake.NewCluster(t, 3, redisfake.ForceMiniredis())
	g.Stop(0)
	if err := g.Clients()[0].Ping(ctx).Err(); err == nil {
		t.Fatal("PING to the stopped node 0 succeeded")
	}
	for i := 1; i < 3; i++ {
		if err := g.Clients()[i].Ping(ctx).Err(); err != nil {
			t.Errorf("PING to node %d: %v", i, err)
		}
	}
	g.Restart(0, false)
	if err := g.Clients()[0].Ping(ctx).Err(); err != nil {
		t.Fatalf("PING to node 0 after Restart: %v", err)
	}
}

func TestRedisClusterSharesOneClock(t *testing.T) {
	ctx := context.Background()
	g := redisfake.NewCluster(t, 3, redisfake.ManualTime(faketest.Epoch))
	key := g.Prefix() + "k"
	for i, c := range g.Clients() {
		if err := c.Set(ctx, key, "v", time.Second).Err(); err != nil {
			t.Fatalf("SET on node %d: %v", i, err)
		}
		if g.Node(i).Clock() != g.Clock() {
			t.Errorf("node %d has a clock of its own", i)
		}
	}
	margin := time.Millisecond
	if g.Node(0).Real() {
		margin = 200 * time.Millisecond
	}

	g.Advance(time.Second - margin)
	for i, c := range g.Clients() {
		if c.Exists(ctx, key).Val() != 1 {
			t.Errorf("node %d: key gone before its TTL", i)
		}
	}
	g.Advance(margin)
	for i, c := range g.Clients() {
		if c.Exists(ctx, key).Val() != 0 {
			t.Errorf("node %d: key present after its TTL", i)
		}
	}
	if got, want := g.Clock().Now(), faketest.Epoch.Add(time.Second); !got.Equal(want) {
		t.Errorf("Clock().Now() = %v, want %v", got, want)
	}
}

func TestRedisClusterAdvanceReachesStoppedNodes(t *testing.T) {
	ctx := context.Background()
	g := redisfake.NewCluster(t, 2, redisfake.ManualTime(faketest.Epoch), redisfake.ForceMiniredis())
	key := g.Prefix() + "k"
	if err := g.Clients()[1].Set(ctx, key, "v", time.Second).Err(); err != nil {
		t.Fatalf("SET on node 1: %v", err)
	}
	g.Stop(1)
	g.Advance(time.Second)
	g.Restart(1, true)
	if n := g.Clients()[1].Exists(ctx, key).Val(); n != 0 {
		t.Fatal("a key outlived its TTL on a node that was down while time passed")
	}
}

func TestRedisClusterMisuse(t *testing.T) {
	if msg := faketest.FatalMessage(t, func(tb testing.TB) { redisfake.NewCluster(tb, 0) }); !strings.Contains(msg, "at least one node") {
		t.Errorf("NewCluster(0) failed with %q", msg)
	}
	msg := faketest.FatalMessage(t, func(tb testing.TB) {
		redisfake.NewCluster(tb, 2, redisfake.ManualTime(faketest.Epoch)).Node(0).Advance(time.Second)
	})
	if !strings.Contains(msg, "Nodes.Advance") {
		t.Errorf("Advance on one node failed with %q, want a hint at Nodes.Advance", msg)
	}
	if msg := faketest.FatalMessage(t, func(tb testing.TB) { redisfake.NewCluster(tb, 2).Node(2) }); !strings.Contains(msg, "no node 2") {
		t.Errorf("Node(2) of 2 failed with %q", msg)
	}
}
