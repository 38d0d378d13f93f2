package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisNodes is a lab of independent redis-servers, one per member, as
// Redlock uses them. Each starts with an append-only file fsynced at
// every write, so that a node killed and restarted with persistence keeps
// every write it acknowledged.
type RedisNodes struct {
	*Lab
}

// StartRedisNodes starts opts.Members standalone redis-servers (5 if 0),
// one per namespace, and returns once each answers PING. Close the lab
// to end them.
func StartRedisNodes(ctx context.Context, opts Options) (*RedisNodes, error) {
	if opts.Members == 0 {
		opts.Members = 5
	}
	l, err := New(ctx, opts)
	if err != nil {
		return nil, err
	}
	r := &RedisNodes{Lab: l}
	for i := range l.Members() {
		if err := r.start(ctx, i, true); err != nil {
			return nil, errors.Join(fmt.Errorf("%w\n%s", err, l.Member(i).LogTail(10)), l.Close())
		}
	}
	return r, nil
}

// nodeCommand is node m's redis-server, with or without persistence.
func nodeCommand(m *Member, persist bool) Command {
	extra := []string{"appendonly yes", "appendfsync always"}
	if !persist {
		extra = nil // redisConfCommand's "appendonly no" and no RDB
	}
	return redisConfCommand(m, redisPort, true, extra)
}

// start starts node i with or without persistence and waits for its PING.
func (r *RedisNodes) start(ctx context.Context, i int, persist bool) error {
	m, err := r.member(i)
	if err != nil {
		return err
	}
	if err := m.Start(nodeCommand(m, persist)); err != nil {
		return err
	}
	return r.AwaitUp(ctx, i)
}

// Restart kills node i (SIGKILL) and starts it again. With persist, it
// comes back with its append-only file and so with every write it
// acknowledged. Without, its data directory is emptied and it runs with
// no persistence (appendonly no, no RDB) until restarted with it: it comes
// back empty, as a node that never persisted does after a crash. Restart
// returns once the node answers PING.
func (r *RedisNodes) Restart(ctx context.Context, i int, persist bool) error {
	m, err := r.member(i)
	if err != nil {
		return err
	}
	if err := m.Kill(); err != nil {
		return err
	}
	if !persist {
		if err := os.RemoveAll(m.DataDir()); err != nil {
			return fmt.Errorf("lab: wiping node %d: %w", i, err)
		}
	}
	return r.start(ctx, i, persist)
}

// AwaitUp waits until node i answers PING (not while it loads its data).
func (r *RedisNodes) AwaitUp(ctx context.Context, i int) error {
	return poll(ctx, fmt.Sprintf("Redis node %d", i), func(ctx context.Context) error {
		return r.ask(ctx, r.Addr(i), func(ctx context.Context, c *redis.Client) error {
			return c.Ping(ctx).Err()
		})
	})
}

// Addr is node i's address, ip:port.
func (r *RedisNodes) Addr(i int) string {
	m := r.Member(i)
	if m == nil {
		return ""
	}
	return netip.AddrPortFrom(m.IP(), redisPort).String()
}

// Addrs are every node's address, in index order.
func (r *RedisNodes) Addrs() []string {
	var addrs []string
	for i := range r.Members() {
		addrs = append(addrs, r.Addr(i))
	}
	return addrs
}

// Client is a go-redis client of node i, dialing through the lab's
// Dialer. Close it before the lab.
func (r *RedisNodes) Client(i int) *redis.Client { return r.client(r.Addr(i), time.Second, 0) }
