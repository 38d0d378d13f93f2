package backends

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/locks/redlock"
	"github.com/lockproof/lockproof/propertytest"
)

// RedisLockOn is the Factory of redislock on the real Redis server at addr,
// under a key prefix of its own that is deleted after every run. A real
// server keeps its own time, so the run does too: Clock is the system
// clock and Advance sleeps. Runs therefore last seconds (use a short
// Options.TTL, such as 200ms), and the lease model's clock tolerance
// (locks.Drift) must cover the difference between the server's clock rate
// and this machine's, which it does for a server on the same machine or
// one kept in step by NTP.
func RedisLockOn(addr string) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		if addr == "" {
			return nil, fmt.Errorf("backends: RedisLockOn needs the server's address")
		}
		r, err := redisfake.Start(redisfake.At(addr))
		if err != nil {
			return nil, fmt.Errorf("backends: %w", err)
		}
		propertytest.CloseAtCleanup(env, "the Redis fake", r)
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				return redislock.New(r.NewClient(), name, append(r.LockOptions(), opts...)...)
			},
			Clock:   locks.SystemClock{},
			Advance: time.Sleep,
		}, nil
	}
}

// RedlockOn is the Factory of redlock on the real, independent Redis
// servers at addrs (at least 3), in real time as RedisLockOn is. The suite
// cannot stop a real server, so no node-down fault is offered and the
// availability check is off: run it with Claims of FaultCrash only (redlock
// gives no fencing token, so it does not claim FaultPause).
func RedlockOn(addrs []string) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		if len(addrs) < 3 {
			return nil, fmt.Errorf("backends: RedlockOn needs at least 3 independent servers, got %d", len(addrs))
		}
		g, err := redisfake.StartCluster(len(addrs), redisfake.NodesAt(addrs...))
		if err != nil {
			return nil, fmt.Errorf("backends: %w", err)
		}
		propertytest.CloseAtCleanup(env, "the Redis fakes", g)
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				return redlock.New(g.NewClients(), name, append(g.LockOptions(), opts...)...)
			},
			Clock:   locks.SystemClock{},
			Advance: time.Sleep,
		}, nil
	}
}
