package main

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/consullock"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/locks/zklock"
)

// backend is an embedded server and a way to make a semaphore on a client
// of its own, as another process would have.
type backend struct {
	name      string
	semaphore func(name string, permits int) (locks.Locker, error)
	close     func() error
}

// zkSession is the session timeout of the ZooKeeper clients, and so the TTL
// of their permits: minizk's default tick grants it.
const zkSession = 10 * time.Second

// startBackend starts the embedded backend called name.
func startBackend(name string) (*backend, error) {
	switch name {
	case "redis":
		r, err := redisfake.Start(redisfake.ForceMiniredis())
		if err != nil {
			return nil, err
		}
		return &backend{name: "miniredis", close: r.Close,
			semaphore: func(n string, permits int) (locks.Locker, error) {
				return redislock.NewSemaphore(r.NewClient(), n, permits, r.LockOptions()...)
			}}, nil
	case "consul":
		c, err := consulfake.Start(consulfake.ForceMiniconsul())
		if err != nil {
			return nil, err
		}
		return &backend{name: "miniconsul", close: c.Close,
			semaphore: func(n string, permits int) (locks.Locker, error) {
				return consullock.NewSemaphore(c.NewClient(), n, permits, c.LockOptions()...)
			}}, nil
	case "zk":
		z, err := zkfake.Start(zkfake.ForceMinizk())
		if err != nil {
			return nil, err
		}
		return &backend{name: "minizk", close: z.Close,
			semaphore: func(n string, permits int) (locks.Locker, error) {
				conn, _, err := z.Connect(zkSession)
				if err != nil {
					return nil, err
				}
				return zklock.NewSemaphore(conn, n, permits, append(z.LockOptions(), locks.WithTTL(zkSession))...)
			}}, nil
	}
	return nil, fmt.Errorf("%w: backend %q (want redis, consul or zk)", errConfig, name)
}
