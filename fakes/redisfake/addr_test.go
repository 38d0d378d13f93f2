package redisfake_test

import (
	"strings"
	"testing"

	"github.com/lockproof/lockproof/fakes/redisfake"
)

// A group's Addr lists its nodes' addresses in order, the form of
// EnvAddrs; miniredis nodes are not Real.
func TestNodesAddr(t *testing.T) {
	g := redisfake.NewCluster(t, 3, redisfake.ForceMiniredis())
	addrs := strings.Split(g.Addr(), ",")
	if len(addrs) != 3 {
		t.Fatalf("Addr() = %q, want 3 addresses", g.Addr())
	}
	for i, a := range addrs {
		if a != g.Node(i).Addr() {
			t.Errorf("address %d = %q, node's %q", i, a, g.Node(i).Addr())
		}
	}
	if g.Real() {
		t.Error("miniredis nodes report Real")
	}
}
