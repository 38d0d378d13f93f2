package lab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Grudge says, for each member index, which members it cannot exchange
// packets with. The constructors below make symmetric ones after Jepsen's
// partition targets; Apply makes any Grudge symmetric.
type Grudge map[int][]int

// Partition returns the Grudge that splits n members into groups: a member
// reaches only the members of its own group. Every member must be in
// exactly one group.
func Partition(n int, groups ...[]int) (Grudge, error) {
	group := make([]int, n)
	for i := range group {
		group[i] = -1
	}
	for g, members := range groups {
		for _, i := range members {
			if i < 0 || i >= n {
				return nil, fmt.Errorf("lab: partition of %d members names member %d", n, i)
			}
			if group[i] >= 0 {
				return nil, fmt.Errorf("lab: member %d is in two groups", i)
			}
			group[i] = g
		}
	}
	g := Grudge{}
	for i := range n {
		if group[i] < 0 {
			return nil, fmt.Errorf("lab: member %d is in no group", i)
		}
		for j := range n {
			if group[j] != group[i] {
				g[i] = append(g[i], j)
			}
		}
	}
	return g, nil
}

// Isolate returns the Grudge that cuts member i off from the n-1 others
// (Jepsen's "one"; "primaries" when i is the leader).
func Isolate(n, i int) (Grudge, error) {
	var rest []int
	for j := range n {
		if j != i {
			rest = append(rest, j)
		}
	}
	return Partition(n, []int{i}, rest)
}

// Split returns the Grudge that cuts minority (fewer than half of the n
// members) off from the majority, Jepsen's "majority".
func Split(n int, minority ...int) (Grudge, error) {
	if len(minority) == 0 || 2*len(minority) >= n {
		return nil, fmt.Errorf("lab: %d of %d members is no minority", len(minority), n)
	}
	var majority []int
	for j := range n {
		if !slices.Contains(minority, j) {
			majority = append(majority, j)
		}
	}
	return Partition(n, minority, majority)
}

// Bridge returns Jepsen's "bridge" for n >= 3 members: the members below
// n/2 and those above it cannot reach each other, and member n/2 reaches
// all, so two overlapping majorities share it.
func Bridge(n int) (Grudge, error) {
	if n < 3 {
		return nil, fmt.Errorf("lab: a bridge needs 3 members, not %d", n)
	}
	g := Grudge{}
	for i := range n / 2 {
		for j := n/2 + 1; j < n; j++ {
			g[i] = append(g[i], j)
			g[j] = append(g[j], i)
		}
	}
	return g, nil
}

// Reaches reports whether members i and j may exchange packets under g.
func (g Grudge) Reaches(i, j int) bool {
	return !slices.Contains(g[i], j) && !slices.Contains(g[j], i)
}

// symmetric returns each member's drop list under g made symmetric, sorted.
func (g Grudge) symmetric(n int) ([][]int, error) {
	drops := make([][]int, n)
	for i, js := range g {
		for _, j := range js {
			if i < 0 || i >= n || j < 0 || j >= n || i == j {
				return nil, fmt.Errorf("lab: grudge %d->%d in a lab of %d members", i, j, n)
			}
			drops[i] = append(drops[i], j)
			drops[j] = append(drops[j], i)
		}
	}
	for i := range drops {
		slices.Sort(drops[i])
		drops[i] = slices.Compact(drops[i])
	}
	return drops, nil
}

// nftTable is the table the lab's rules live in, in each member's namespace.
const nftTable = "inet lockproof_lab"

// Apply replaces the lab's partition with g: nftables rules in each
// member's namespace drop its packets to and from the members g names.
// The test process (on the bridge) still reaches every member.
func (l *Lab) Apply(ctx context.Context, g Grudge) error {
	drops, err := g.symmetric(len(l.members))
	if err != nil {
		return err
	}
	var errs []error
	for i, m := range l.members {
		var peers []string
		for _, j := range drops[i] {
			peers = append(peers, l.members[j].ip.String())
		}
		errs = append(errs, m.nft(ctx, peers))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.logf("lab: partition %v", drops)
	return nil
}

// nft replaces the member's rules with ones dropping packets to and from
// peers (none: no rules).
func (m *Member) nft(ctx context.Context, peers []string) error {
	// Adding the table first makes the delete succeed when none exists.
	script := "add table " + nftTable + "\ndelete table " + nftTable + "\n"
	if len(peers) > 0 {
		set := strings.Join(peers, ", ")
		script += "table " + nftTable + " {\n" +
			"\tchain input { type filter hook input priority 0; policy accept; ip saddr { " + set + " } drop; }\n" +
			"\tchain output { type filter hook output priority 0; policy accept; ip daddr { " + set + " } drop; }\n" +
			"}\n"
	}
	if _, err := outputIn(ctx, []byte(script), "nsenter", "--net="+netnsPath(m.ns), "--", "nft", "-f", "-"); err != nil {
		return fmt.Errorf("lab: member %d's rules: %w", m.index, err)
	}
	return nil
}

// Disconnect takes member i's link down: it reaches nobody, the test
// process included, until Heal.
func (l *Lab) Disconnect(ctx context.Context, i int) error {
	m, err := l.member(i)
	if err != nil {
		return err
	}
	if err := run(ctx, "ip", "-n", m.ns, "link", "set", "eth0", "down"); err != nil {
		return err
	}
	l.logf("lab: member %d disconnected", i)
	return nil
}

// Heal removes every partition rule and brings every member's link up.
func (l *Lab) Heal(ctx context.Context) error {
	var errs []error
	for _, m := range l.members {
		errs = append(errs, m.nft(ctx, nil), run(ctx, "ip", "-n", m.ns, "link", "set", "eth0", "up"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.logf("lab: healed")
	return nil
}
