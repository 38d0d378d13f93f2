package main

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
)

// housekeepingTimeout bounds the program's own calls to Redis: the first
// PING and the deletion of its keys.
const housekeepingTimeout = 10 * time.Second

// backend is the Redis server of one run and the clients of its processes.
// Every key the run writes lives under prefix, unique to the run.
type backend struct {
	desc    string // what the report names the server by
	addr    string
	prefix  string
	mini    *miniredis.Miniredis // nil on a real server
	admin   *redis.Client        // the program's own client, for housekeeping
	clients []*redis.Client
}

// openBackend starts an embedded miniredis when addr is empty, or connects to
// the real server at addr and checks that it answers.
func openBackend(ctx context.Context, addr string) (*backend, error) {
	b := &backend{addr: addr, prefix: "lockproof-contend-" + locks.NewOwner()[:8] + ":"}
	if addr == "" {
		m := miniredis.NewMiniRedis()
		// Count TTLs down on the wall clock, as a real server does.
		m.ClockTTL(true)
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("starting miniredis: %w", err)
		}
		b.mini, b.addr = m, m.Addr()
		b.desc = "embedded miniredis at " + b.addr
	} else {
		b.desc = "Redis at " + addr
	}
	b.admin = b.newClient()
	if b.mini != nil {
		return b, nil
	}
	ctx, cancel := context.WithTimeout(ctx, housekeepingTimeout)
	defer cancel()
	if err := b.admin.Ping(ctx).Err(); err != nil {
		_ = b.close() // nothing was written yet; the PING error says it all
		return nil, fmt.Errorf("no answer to PING from Redis at %s: %w", addr, err)
	}
	return b, nil
}

// newClient returns a client with its own connection pool: one process.
func (b *backend) newClient() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: b.addr, DisableIdentity: true})
	b.clients = append(b.clients, c)
	return c
}

// close deletes the run's keys, then closes every client and the embedded
// server. It runs even after ctx was cancelled.
func (b *backend) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), housekeepingTimeout)
	defer cancel()
	err := b.deleteKeys(ctx)
	if err != nil {
		err = fmt.Errorf("deleting keys %s* on %s: %w", b.prefix, b.addr, err)
	}
	for _, c := range b.clients {
		_ = c.Close() // only fails for a client closed already
	}
	if b.mini != nil {
		b.mini.Close()
	}
	return err
}

// deleteKeys removes every key under the run's prefix.
func (b *backend) deleteKeys(ctx context.Context) error {
	var keys []string
	iter := b.admin.Scan(ctx, 0, b.prefix+"*", 256).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("SCAN: %w", err)
	}
	for len(keys) > 0 {
		n := min(len(keys), 256)
		if err := b.admin.Del(ctx, keys[:n]...).Err(); err != nil {
			return fmt.Errorf("DEL: %w", err)
		}
		keys = keys[n:]
	}
	return nil
}
