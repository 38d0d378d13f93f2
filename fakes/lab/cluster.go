package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// ErrNoLeader is wrapped by Leader's error when no member answers as the
// leader.
var ErrNoLeader = errors.New("lab: no leader")

// pollEvery is how often the Await methods ask the members again.
const pollEvery = 50 * time.Millisecond

// askTimeout bounds one status question to one member.
const askTimeout = 500 * time.Millisecond

// status is what a member says of itself.
type status struct {
	leader bool   // it leads
	joined bool   // it serves as a member of a quorum (leader or follower)
	term   uint64 // its term or epoch, to rank rival leaders
}

// Timing is how a cluster's members notice a lost leader and take over.
type Timing struct {
	// Tick is etcd's or Consul's Raft heartbeat interval, or ZooKeeper's
	// tickTime.
	Tick time.Duration
	// Election is how long a member hears nothing from its leader before it
	// gives it up: etcd's election timeout or Consul's heartbeat timeout
	// (each randomized up to twice that), ZooKeeper's syncLimit ticks.
	Election time.Duration
	// Sync bounds a new ZooKeeper leader's wait for a quorum of followers
	// to sync with it (initLimit ticks); 0 for etcd.
	Sync time.Duration
}

// Cluster is a lab whose members run one replicated server: a 3-member
// etcd, ZooKeeper or Consul. Its Lab's node controls and partitions act on it.
type Cluster struct {
	*Lab
	// Kind names the server: "etcd", "zookeeper" or "consul".
	Kind string
	// Timing is the members' failure detection, for the recovery time a
	// client must allow after a leader fault.
	Timing Timing
	port   int
	ask    func(ctx context.Context, c *Cluster, i int) (status, error)
	// rejoin, if set, completes AwaitJoined: what else member i needs
	// before it serves again (Consul's gossip).
	rejoin func(ctx context.Context, c *Cluster, i int) error
}

// ClientAddr is member i's client address, ip:port.
func (c *Cluster) ClientAddr(i int) string {
	m := c.Member(i)
	if m == nil {
		return ""
	}
	return netip.AddrPortFrom(m.IP(), uint16(c.port)).String()
}

// ClientAddrs are every member's client address, in index order.
func (c *Cluster) ClientAddrs() []string {
	var addrs []string
	for i := range c.Members() {
		addrs = append(addrs, c.ClientAddr(i))
	}
	return addrs
}

// Leader asks every running, unpaused member and returns the index of the
// one that says it leads (the one of the highest term if several do), or
// an error wrapping ErrNoLeader.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	i, _, err := c.lead(ctx)
	return i, err
}

// lead is Leader with the leader's term.
func (c *Cluster) lead(ctx context.Context) (int, uint64, error) {
	best, term := -1, uint64(0)
	var errs []error
	for i, m := range c.Members() {
		if !m.Running() || m.Paused() {
			continue
		}
		s, err := c.ask(ctx, c, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if s.leader && (best < 0 || s.term > term) {
			best, term = i, s.term
		}
	}
	if best < 0 && len(errs) == 0 {
		return -1, 0, fmt.Errorf("%w among the %s members: every member answered, none leads", ErrNoLeader, c.Kind)
	}
	if best < 0 {
		return -1, 0, fmt.Errorf("%w among the %s members: %w", ErrNoLeader, c.Kind, errors.Join(errs...))
	}
	return best, term, nil
}

// AwaitLeader waits until a member other than those in except leads, and
// returns its index.
func (c *Cluster) AwaitLeader(ctx context.Context, except ...int) (int, error) {
	leader := -1
	err := poll(ctx, "a "+c.Kind+" leader", func(ctx context.Context) error {
		i, err := c.Leader(ctx)
		switch {
		case err != nil:
			return err
		case slices.Contains(except, i):
			return fmt.Errorf("lab: member %d still leads", i)
		}
		leader = i
		return nil
	})
	if err != nil {
		return -1, err
	}
	return leader, nil
}

// AwaitJoined waits until member i answers as a leader or a follower in
// the current leader's term: up and part of the quorum again, after a
// restart, a resume or a heal. A Consul member must also be back in the
// gossip (see StartConsul).
func (c *Cluster) AwaitJoined(ctx context.Context, i int) error {
	if _, err := c.member(i); err != nil {
		return err
	}
	err := poll(ctx, fmt.Sprintf("%s member %d", c.Kind, i), func(ctx context.Context) error {
		s, err := c.ask(ctx, c, i)
		if err != nil {
			return err
		}
		_, term, err := c.lead(ctx)
		switch {
		case err != nil:
			return err
		case !s.joined:
			return errors.New("not in a quorum")
		case s.term < term:
			return fmt.Errorf("in term %d, the leader in %d", s.term, term)
		}
		return nil
	})
	if err != nil || c.rejoin == nil {
		return err
	}
	return c.rejoin(ctx, c, i)
}

// poll calls f every pollEvery until it returns nil or ctx ends; the
// error names what was awaited and f's last error.
func poll(ctx context.Context, what string, f func(ctx context.Context) error) error {
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lab: awaiting %s: %w (last: %w)", what, ctx.Err(), err)
		case <-time.After(pollEvery):
		}
	}
}

// startCluster makes a lab of n members, starts command(i) in member i and
// waits for a leader; on error it closes the lab.
func startCluster(ctx context.Context, opts Options, c *Cluster, command func(c *Cluster, i int) Command) (*Cluster, error) {
	l, err := New(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.Lab = l
	for i, m := range l.Members() {
		if err := m.Start(command(c, i)); err != nil {
			return nil, errors.Join(err, l.Close())
		}
	}
	if _, err := c.AwaitLeader(ctx); err != nil {
		for _, m := range l.Members() {
			err = fmt.Errorf("%w\nmember %d's log:\n%s", err, m.Index(), m.LogTail(15))
		}
		return nil, errors.Join(err, l.Close())
	}
	return c, nil
}
