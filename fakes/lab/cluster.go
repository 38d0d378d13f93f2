package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
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
	// Tick is etcd's heartbeat interval, or ZooKeeper's tickTime.
	Tick time.Duration
	// Election is how long a member hears nothing from its leader before it
	// gives it up: etcd's election timeout (randomized up to twice that),
	// ZooKeeper's syncLimit ticks.
	Election time.Duration
	// Sync bounds a new ZooKeeper leader's wait for a quorum of followers
	// to sync with it (initLimit ticks); 0 for etcd.
	Sync time.Duration
}

// Cluster is a lab whose members run one replicated server: a 3-member
// etcd or ZooKeeper. Its Lab's node controls and partitions act on it.
type Cluster struct {
	*Lab
	// Kind names the server: "etcd" or "zookeeper".
	Kind string
	// Timing is the members' failure detection, for the recovery time a
	// client must allow after a leader fault.
	Timing Timing
	port   int
	ask    func(ctx context.Context, c *Cluster, i int) (status, error)
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
	if best < 0 {
		return -1, 0, fmt.Errorf("%w among the %s members: %w", ErrNoLeader, c.Kind, errors.Join(errs...))
	}
	return best, term, nil
}

// AwaitLeader waits until a member other than those in except leads, and
// returns its index.
func (c *Cluster) AwaitLeader(ctx context.Context, except ...int) (int, error) {
	for {
		i, err := c.Leader(ctx)
		if err == nil && !contains(except, i) {
			return i, nil
		}
		if err == nil {
			err = fmt.Errorf("lab: member %d still leads", i)
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("lab: awaiting a %s leader: %w (last: %w)", c.Kind, ctx.Err(), err)
		case <-time.After(pollEvery):
		}
	}
}

// AwaitJoined waits until member i answers as a leader or a follower in
// the current leader's term: up and part of the quorum again, after a
// restart, a resume or a heal.
func (c *Cluster) AwaitJoined(ctx context.Context, i int) error {
	if _, err := c.member(i); err != nil {
		return err
	}
	for {
		s, err := c.ask(ctx, c, i)
		if err == nil {
			_, term, lerr := c.lead(ctx)
			switch {
			case lerr != nil:
				err = lerr
			case !s.joined:
				err = errors.New("not in a quorum")
			case s.term < term:
				err = fmt.Errorf("in term %d, the leader in %d", s.term, term)
			default:
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lab: awaiting %s member %d: %w (last: %w)", c.Kind, i, ctx.Err(), err)
		case <-time.After(pollEvery):
		}
	}
}

// contains reports whether xs holds x.
func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
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
