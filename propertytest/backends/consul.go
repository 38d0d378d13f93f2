package backends

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/consullock"
	"github.com/lockproof/lockproof/propertytest"
)

// consulTimeout bounds the housekeeping requests of the Consul factories.
const consulTimeout = 10 * time.Second

// ConsulLockOptions are the Options to run ConsulLock with: the default
// TTL (1s) and a Slack of 2.25s, since a crashed holder's lock is free
// 3×TTL after its last renewal (see ConsulLock).
func ConsulLockOptions() propertytest.Options {
	return propertytest.Options{Slack: 2*time.Second + time.Second/4}
}

// ConsulLockOnOptions are the Options to run ConsulLockOn with: TTL 1s and
// a Slack of 3s, for an agent's session invalidation and lock-delay in
// real time (see ConsulLockOn).
func ConsulLockOnOptions() propertytest.Options {
	return propertytest.Options{TTL: time.Second, Slack: 3 * time.Second}
}

// ConsulLock is the Factory of consullock on miniconsul in manual time
// (consulfake.New with ManualTime and ForceMiniconsul: never a real agent),
// which accepts session TTLs from 10ms. Each Locker has the default
// lock-delay, one TTL.
//
// Run it with ConsulLockOptions (Options.Slack of at least 2×TTL): Consul
// invalidates a session TTL×2 after its last renewal, and the lock-delay
// keeps the key from everybody for one more TTL. Claims: the defaults,
// FaultCrash and FaultPause (fenced by the key's ModifyIndex).
//
// It offers one fault, FaultPartition: the holder's session is invalidated
// now, as when its node fails its serf health check. consullock stays
// exclusive under it (the lock-delay outlasts the holder's deadline), but
// the holder learns of the loss before its TTL is over, which the lease
// model counts as a violation: it is not claimed, and the suite reports
// what it causes as expected violations.
func ConsulLock() propertytest.Factory { return onMiniconsul(consulMutex, true) }

// consulMutex is consullock.NewWithSession as a newConsulLocker.
func consulMutex(client *api.Client, name string, s consullock.Session, opts ...locks.Option) (locks.Locker, error) {
	return consullock.NewWithSession(client, name, s, opts...)
}

// ConsulSemaphore is the Factory of consullock.NewSemaphoreWithSession of
// permits permits on miniconsul in manual time, as ConsulLock: the same
// sessions, lock-delay and clean-up, so run it with ConsulLockOptions and
// Options.Permits set to permits. Claims: the defaults, FaultCrash and
// FaultPause. It offers no backend fault.
func ConsulSemaphore(permits int) propertytest.Factory {
	return onMiniconsul(func(c *api.Client, name string, s consullock.Session, opts ...locks.Option) (locks.Locker, error) {
		return consullock.NewSemaphoreWithSession(c, name, permits, s, opts...)
	}, false)
}

// newConsulLocker makes a Locker of consullock on client with the
// Consul-specific settings s.
type newConsulLocker func(client *api.Client, name string, s consullock.Session, opts ...locks.Option) (locks.Locker, error)

// onMiniconsul is the Factory of the lock newLocker makes on miniconsul in
// manual time, each Locker on a client of its own; with invalidate, it
// offers ConsulLock's fault (the lock's key is consullock.Key).
func onMiniconsul(newLocker newConsulLocker, invalidate bool) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		c, err := consulfake.Start(consulfake.ManualTime(epoch), consulfake.ForceMiniconsul(),
			consulfake.SessionTTLMin(locks.MinTTL))
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "miniconsul", c)
		// At the end, before miniconsul stops: time runs out for every lease
		// left, so that their monitors (blocking queries, and pauses on the
		// manual clock once the server is gone) end with them.
		env.Cleanup(func() { c.Advance(time.Hour) })
		be := newConsulBackend(func() (*api.Client, error) { return c.NewClient(), nil }, newLocker, c.LockOptions(), c.SessionTTLMin())
		// Every connection is in memory: the lockers' clients and the
		// fake's own, which the fault reads the holder with.
		be.Clock, be.Advance, be.InProcess = c.Clock(), c.Advance, true
		if !invalidate {
			return be.Backend, nil
		}
		be.Faults = []propertytest.Fault{{
			Name: "invalidate the holder's session (its node's health check fails)", Kind: propertytest.FaultPartition,
			Inject: func() error { return invalidateHolder(c, be.lockName) },
			Heal:   func() error { return nil }, // new sessions work again
		}}
		return be.Backend, nil
	}
}

// ConsulLockOn is the Factory of consullock on the real Consul agent at
// addr (host:port of its HTTP API), under a KV prefix of its own that is
// deleted after every run. A real agent keeps its own time, so the run
// does too: Clock is the system clock and Advance sleeps.
//
// The session TTL is Options.TTL, which the servers must accept: Consul's
// default session_ttl_min is 10s, far too slow for a run; start the agent
// with a lower one (session_ttl_min = "1s", as consulfake.SessionTTLMin
// does for the agents consulfake.New starts) and use Options.TTL 1s. A TTL
// the servers refuse fails every acquisition with their message. Use a
// Slack of at least 2×TTL, plus the agent's timer latency (1s is ample):
// sessions are invalidated up to TTL×2 after their last renewal, and the
// lock-delay (one TTL) follows. Claims: the defaults. No backend fault.
func ConsulLockOn(addr string) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		if addr == "" {
			return nil, fmt.Errorf("backends: ConsulLockOn needs the agent's address")
		}
		c := &consulOn{env: env, addr: addr, prefix: "lockproof-test-" + locks.NewOwner()[:8] + "/"}
		admin, err := c.newClient(nil)
		if err != nil {
			return nil, err
		}
		env.Cleanup(func() { c.deleteKeys(admin) })
		be := newConsulBackend(func() (*api.Client, error) { return c.newClient(nil) }, consulMutex, []locks.Option{locks.WithPrefix(c.prefix)}, locks.MinTTL)
		be.Clock, be.Advance = locks.SystemClock{}, time.Sleep
		return be.Backend, nil
	}
}

// consulBackend is a Backend of consullock, and the name of the lock its
// lockers were made for (the fault needs it).
type consulBackend struct {
	*propertytest.Backend
	lockName string
}

// newConsulBackend returns a consulBackend whose lockers, made by
// newLocker, each use a client of their own, from newClient, with the
// options own before the suite's. Clock and Advance are left to the caller.
func newConsulBackend(newClient func() (*api.Client, error), newLocker newConsulLocker, own []locks.Option, ttlMin time.Duration) *consulBackend {
	be := &consulBackend{}
	be.Backend = &propertytest.Backend{
		NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
			all := append(append([]locks.Option(nil), own...), opts...)
			o, err := locks.Resolve(consullock.DefaultPrefix, all...)
			if err != nil {
				return nil, fmt.Errorf("backends: %w", err)
			}
			be.lockName = name
			s := consullock.Session{LockDelay: consullock.DefaultLockDelay(o.TTL), TTLMin: ttlMin}
			client, err := newClient()
			if err != nil {
				return nil, err
			}
			return newLocker(client, name, s, all...)
		},
	}
	return be
}

// invalidateHolder invalidates the session holding lock name, if any:
// consulfake.Server.ExpireLock, with nobody holding the lock no error.
func invalidateHolder(c *consulfake.Server, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), consulTimeout)
	defer cancel()
	err := c.ExpireLock(ctx, name)
	if err != nil && !errors.Is(err, fakes.ErrNoHolder) {
		return fmt.Errorf("backends: %w", err)
	}
	return nil
}

// consulOn hands out clients of a real agent, closed at the run's cleanup.
type consulOn struct {
	env    propertytest.Env
	addr   string
	prefix string
}

// newClient is a client of the agent with connections of its own, dialed
// by dial (nil: directly).
func (c *consulOn) newClient(dial fakes.DialFunc) (*api.Client, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DialContext: dial}
	client, err := api.NewClient(&api.Config{Address: c.addr, Scheme: "http",
		HttpClient: &http.Client{Transport: consulfake.GateTransport(tr)}})
	if err != nil {
		return nil, fmt.Errorf("backends: consul client for %s: %w", c.addr, err)
	}
	c.env.Cleanup(tr.CloseIdleConnections)
	return client, nil
}

// deleteKeys deletes the run's prefix (the locks' sessions were destroyed
// by their Unlock, or expire by their TTL).
func (c *consulOn) deleteKeys(admin *api.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), consulTimeout)
	defer cancel()
	if _, err := admin.KV().DeleteTree(c.prefix, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		c.env.Logf("backends: delete %s* on %s: %v", c.prefix, c.addr, err)
	}
}
