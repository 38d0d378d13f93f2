package backends

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/locks/redlock"
	"github.com/lockproof/lockproof/propertytest"
)

// epoch is where the manual clocks of the built-in factories start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The fakes' clock is a propertytest.ManualClock: the suite orders the
// timers each Advance passes, which replaying a seed needs.
var _ propertytest.ManualClock = (*fakes.Clock)(nil)

// RedisLock is the Factory of redislock on a single miniredis (redisfake.New
// in manual time). It offers no backend fault.
func RedisLock() propertytest.Factory {
	return OnMiniredis(func(c redis.UniversalClient, name string, opts ...locks.Option) (locks.Locker, error) {
		return redislock.New(c, name, opts...)
	})
}

// RedisSemaphore is the Factory of redislock.NewSemaphore of permits
// permits on a single miniredis (redisfake.New in manual time); run it with
// Options.Permits set to the same number. It offers no backend fault.
func RedisSemaphore(permits int) propertytest.Factory {
	return OnMiniredis(func(c redis.UniversalClient, name string, opts ...locks.Option) (locks.Locker, error) {
		return redislock.NewSemaphore(c, name, permits, opts...)
	})
}

// RedisRWMutex is the Factory of redislock.NewRWMutex on a single
// miniredis (redisfake.New in manual time): each client's Locker is a
// ReadWriteLocker of the mutex's two views. Run it with Options.ReadWrite.
// It offers no backend fault.
func RedisRWMutex() propertytest.Factory {
	return OnMiniredis(func(c redis.UniversalClient, name string, opts ...locks.Option) (locks.Locker, error) {
		m, err := redislock.NewRWMutex(c, name, opts...)
		if err != nil {
			return nil, err
		}
		return propertytest.RWViews(m.RLocker(), m.Locker()), nil
	})
}

// OnMiniredis is the Factory of the lock newLocker makes on a single
// miniredis in manual time, each Locker on a client of its own, with the
// fake's lock options before the suite's. Any lock built on a go-redis
// client fits it: the built-in Redis factories and the mutants use it.
func OnMiniredis(newLocker func(c redis.UniversalClient, name string, opts ...locks.Option) (locks.Locker, error)) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		r, err := redisfake.Start(redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the Redis fake", r)
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				return newLocker(r.NewClient(), name, append(r.LockOptions(), opts...)...)
			},
			Clock:     r.Clock(),
			Advance:   r.Advance,
			InProcess: true,
		}, nil
	}
}

// RedisLockWithFailover is the Factory of redislock on a single Redis
// primary behind a chaos.Proxy that replicates asynchronously (lag, in wall
// time) to a replica, with one fault: FaultFailover, the promotion of the
// replica. redislock does not claim to survive it: with the default
// Options.Claims the suite reports what it breaks as an expected violation.
func RedisLockWithFailover(lag time.Duration) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		g, err := redisfake.StartCluster(2, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the RedisCluster fake", g)
		p, err := chaos.StartProxy(g.Node(0).Addr(), 1)
		if err != nil {
			return nil, err
		}
		env.Cleanup(func() { _ = p.Close() })
		if err := p.Replicate(g.Node(1).Addr(), lag); err != nil {
			return nil, err
		}
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				c := redis.NewClient(&redis.Options{Addr: p.Addr()})
				redisfake.Gate(c, g.Node(0).GateLabel())
				env.Cleanup(func() { _ = c.Close() })
				return redislock.New(c, name, append(g.LockOptions(), opts...)...)
			},
			Clock:   g.Clock(),
			Advance: g.Advance,
			Faults: []propertytest.Fault{{
				Name: "promote the replica", Kind: propertytest.FaultFailover,
				Inject: func() error { _, err := p.Promote(); return err },
			}},
		}, nil
	}
}

// Redlock is the Factory of redlock on n independent miniredis nodes
// (redisfake.NewCluster in manual time), with a FaultNodeDown per node for
// the first (n-1)/2 nodes (a minority: stopped, then restarted with their
// data) and the availability check. Redlock gives no fencing token: run it
// with Claims of FaultCrash and FaultNodeDown.
func Redlock(n int) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		g, err := redisfake.StartCluster(n, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the RedisCluster fake", g)
		be := &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				return redlock.New(g.NewClients(), name, append(g.LockOptions(), opts...)...)
			},
			Clock:     g.Clock(),
			Advance:   g.Advance,
			Nodes:     n,
			StopNode:  g.Stop,
			StartNode: func(i int) { g.Restart(i, true) },
			InProcess: true,
		}
		for i := range (n - 1) / 2 {
			be.Faults = append(be.Faults, propertytest.Fault{
				Name: "node " + string(rune('0'+i)) + " down", Kind: propertytest.FaultNodeDown,
				Inject: func() error { g.Stop(i); return nil },
				Heal:   func() error { g.Restart(i, true); return nil },
			})
		}
		return be, nil
	}
}

// MemLock is the Factory of fakes.MemLock: every client shares one
// in-memory lock on a fakes.Clock.
func MemLock() propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		clock := fakes.NewClock(epoch)
		var shared *fakes.MemLock
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				if shared == nil {
					l, err := fakes.NewMemLock(name, append([]locks.Option{locks.WithClock(clock)}, opts...)...)
					if err != nil {
						return nil, err
					}
					shared = l
				}
				return shared, nil
			},
			Clock:     clock,
			Advance:   clock.Advance,
			InProcess: true,
		}, nil
	}
}

// netTimeout bounds each socket read, write and dial of
// RedisLockWithNetworkFaults's clients, whose runs use an OpTimeout of 30
// ms: every reply through a healed proxy comes in microseconds, so one
// that has not come by then was cut off, and the request's outcome is
// unknown either way. A longer bound only makes a run that cut clients
// off wait for their reads.
const netTimeout = 50 * time.Millisecond

// RedisLockWithNetworkFaults is the Factory of redislock on a single
// miniredis, each client behind a chaos.Proxy of its own, with two
// FaultPartition faults: client 0 partitioned (its bytes held and
// delivered late when the partition heals) and client 1's replies dropped
// (its requests take effect, it never hears so). Run it with a short
// Options.OpTimeout: every operation of a cut-off client waits that long.
func RedisLockWithNetworkFaults() propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		r, err := redisfake.Start(redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the Redis fake", r)
		var proxies []*chaos.Proxy
		proxy := func(i int) (*chaos.Proxy, error) {
			for len(proxies) <= i {
				p, err := chaos.StartProxy(r.Addr(), uint64(len(proxies))+1)
				if err != nil {
					return nil, fmt.Errorf("backends: start proxy: %w", err)
				}
				propertytest.CloseAtCleanup(env, "a proxy", p)
				proxies = append(proxies, p)
			}
			return proxies[i], nil
		}
		clients := 0
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				p, err := proxy(clients)
				if err != nil {
					return nil, err
				}
				clients++
				// Socket timeouts of netTimeout, not go-redis's 3 s: a
				// request context under the scheduler's gate reports no
				// deadline (locks.RequestContext), and go-redis does not
				// interrupt a blocked read when the context is cancelled,
				// so a cut-off client's read, its dial's handshake
				// included, lasts the read timeout.
				c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true,
					ReadTimeout: netTimeout, WriteTimeout: netTimeout, DialTimeout: netTimeout})
				redisfake.Gate(c, r.GateLabel())
				env.Cleanup(func() { _ = c.Close() })
				return redislock.New(c, name, append(r.LockOptions(), opts...)...)
			},
			Clock:   r.Clock(),
			Advance: r.Advance,
			Faults: []propertytest.Fault{
				{Name: "partition client 0", Kind: propertytest.FaultPartition,
					Inject: func() error { return onProxy(proxy, 0, (*chaos.Proxy).Partition) },
					Heal:   func() error { return onProxy(proxy, 0, (*chaos.Proxy).Heal) }},
				{Name: "drop the replies to client 1", Kind: propertytest.FaultPartition,
					Inject: func() error { return onProxy(proxy, 1, (*chaos.Proxy).DropReplies) },
					Heal:   func() error { return onProxy(proxy, 1, (*chaos.Proxy).Heal) }},
			},
		}, nil
	}
}

// onProxy applies do to proxy i, started if it was not.
func onProxy(proxy func(int) (*chaos.Proxy, error), i int, do func(*chaos.Proxy)) error {
	p, err := proxy(i)
	if err != nil {
		return err
	}
	do(p)
	return nil
}
