package chaos

import (
	"fmt"
	"sort"
	"sync"
	"testing"
)

// Net is a network of named nodes whose links are Proxies: the link from a
// client node to a server node is one proxy, and partitions cut the links
// between nodes that end up in different groups. It is safe for concurrent
// use.
type Net struct {
	tb   testing.TB
	seed uint64

	mu    sync.Mutex
	links map[[2]string]*Proxy // (client, server) → its proxy
	group map[string]int       // node → its group; absent: connected to all
}

// NewNet returns an empty network for one test; its proxies are closed by
// tb.Cleanup. seed drives every proxy's jitter (each link gets its own
// stream, derived from seed and the link's names).
func NewNet(tb testing.TB, seed uint64) *Net {
	return &Net{tb: tb, seed: seed, links: map[[2]string]*Proxy{}, group: map[string]int{}}
}

// Link returns the proxy that carries client's traffic to server, whose
// real address is target, creating it on first use. Point the client at the
// proxy's Addr.
func (n *Net) Link(client, server, target string) *Proxy {
	n.tb.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	key := [2]string{client, server}
	if p, ok := n.links[key]; ok {
		return p
	}
	p := NewProxy(n.tb, target, n.seed^hashName(client+"→"+server))
	n.links[key] = p
	n.applyLocked(key, p)
	return p
}

// Partition splits the nodes into groups: links between nodes of different
// groups are cut (bytes held, no RST) and links inside a group heal. Every
// node that has a link must be in exactly one group.
func (n *Net) Partition(groups ...[]string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	g := map[string]int{}
	for i, nodes := range groups {
		for _, node := range nodes {
			if _, dup := g[node]; dup {
				return fmt.Errorf("net: node %q is in two groups", node)
			}
			g[node] = i
		}
	}
	for key := range n.links {
		for _, node := range key {
			if _, ok := g[node]; !ok {
				return fmt.Errorf("net: node %q has links but is in no group", node)
			}
		}
	}
	n.group = g
	for key, p := range n.links {
		n.applyLocked(key, p)
	}
	return nil
}

// Isolate cuts every link of node, leaving the others as they are.
func (n *Net) Isolate(node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for key, p := range n.links {
		if key[0] == node || key[1] == node {
			p.Partition()
		}
	}
}

// HealAll heals every link and forgets the partition.
func (n *Net) HealAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.group = map[string]int{}
	for _, p := range n.links {
		p.Heal()
	}
}

// Nodes returns the names of the nodes that have links, sorted.
func (n *Net) Nodes() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	seen := map[string]bool{}
	for key := range n.links {
		seen[key[0]], seen[key[1]] = true, true
	}
	out := make([]string, 0, len(seen))
	for node := range seen {
		out = append(out, node)
	}
	sort.Strings(out)
	return out
}

func (n *Net) applyLocked(key [2]string, p *Proxy) {
	ga, oka := n.group[key[0]]
	gb, okb := n.group[key[1]]
	if oka && okb && ga != gb {
		p.Partition()
		return
	}
	p.Heal()
}

// hashName is FNV-1a, to give each link its own jitter stream.
func hashName(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
