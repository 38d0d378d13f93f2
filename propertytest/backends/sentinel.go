package backends

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/propertytest"
)

// redisTimeout bounds the clean-up of a run's keys on a real Redis.
const redisTimeout = 10 * time.Second

// RedisLockViaSentinel is the Factory of redislock on a real Redis
// deployment watched by Sentinel: each locker has a go-redis failover
// client of its own, given the master's name and the Sentinels' addresses
// (host:port), which asks the Sentinels for the current primary and
// follows a failover. Keys live under a prefix of the run's own, deleted
// after the run through the primary of that moment. Time is real, as in
// RedisLockOn, whose options fit (a short Options.TTL, such as 200ms).
//
// Claims: redislock's, FaultCrash and FaultPause. A failover is not
// claimed: a primary that acknowledged a lock's SET and failed before a
// replica had it loses the grant, and two clients may then hold the lock.
func RedisLockViaSentinel(master string, sentinels []string, opts ...DeployOption) propertytest.Factory {
	cfg := newDeployConfig(opts)
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		if master == "" || len(sentinels) == 0 || slices.Contains(sentinels, "") {
			return nil, fmt.Errorf("backends: RedisLockViaSentinel needs the master's name and the Sentinels' addresses, got %q %q", master, sentinels)
		}
		if err := cfg.noDialer("RedisLockViaSentinel"); err != nil {
			return nil, err
		}
		prefix := "lockproof-test-" + locks.NewOwner()[:8] + ":"
		lk := cfg.links(env)
		newClient := func(dial fakes.DialFunc) *redis.Client {
			c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: sentinels, ContextTimeoutEnabled: true, Dialer: dial})
			env.Cleanup(func() { _ = c.Close() })
			return c
		}
		admin := newClient(nil)
		ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
		defer cancel()
		if err := admin.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("backends: the primary %q through Sentinels %v: %w", master, sentinels, err)
		}
		env.Cleanup(func() {
			if err := deleteKeys(admin, prefix); err != nil {
				env.Logf("backends: delete %s* through Sentinel: %v", prefix, err)
			}
		})
		clients := 0
		be := &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				c := newClient(cfg.dialFor(lk, clients))
				clients++
				redisfake.Gate(c, "redis node 0")
				own := []locks.Option{locks.WithPrefix(prefix), locks.WithClock(locks.SystemClock{})}
				return redislock.New(c, name, append(own, opts...)...)
			},
			Clock:   locks.SystemClock{},
			Advance: time.Sleep,
		}
		be.Faults = lk.faults()
		return be, nil
	}
}

// deleteKeys deletes every key under prefix on c's server.
func deleteKeys(c *redis.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	defer cancel()
	var errs []error
	iter := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		errs = append(errs, c.Del(ctx, iter.Val()).Err())
	}
	errs = append(errs, iter.Err())
	return errors.Join(errs...)
}
