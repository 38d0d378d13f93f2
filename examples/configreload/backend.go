package main

import (
	"fmt"
	"time"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/consullock"
	"github.com/lockproof/lockproof/locks/etcdlock"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/locks/zklock"
)

// rwLock is one process's read-write lock: the readers' and the writers'
// Lockers of one lock on one client.
type rwLock struct {
	read, write locks.Locker
}

// backend is an embedded server and a way to make a read-write lock on a
// client of its own, as another process would have.
type backend struct {
	name  string
	lock  func(name string) (rwLock, error)
	close func() error
}

// zkSession is the session timeout of the ZooKeeper clients, and so the TTL
// of their leases: minizk's default tick grants it.
const zkSession = 10 * time.Second

// backends are the names startBackend knows, for the usage message.
const backends = "redis, etcd, consul or zk"

// startBackend starts the embedded backend called name.
func startBackend(name string) (*backend, error) {
	switch name {
	case "redis":
		r, err := redisfake.Start(redisfake.ForceMiniredis())
		if err != nil {
			return nil, err
		}
		return &backend{name: "miniredis", close: r.Close,
			lock: func(n string) (rwLock, error) {
				m, err := redislock.NewRWMutex(r.NewClient(), n, r.LockOptions()...)
				if err != nil {
					return rwLock{}, err
				}
				return rwLock{read: m.RLocker(), write: m.Locker()}, nil
			}}, nil
	case "etcd":
		e, err := etcdfake.Start(etcdfake.ForceEmbedded())
		if err != nil {
			return nil, err
		}
		return &backend{name: "embedded etcd", close: e.Close,
			lock: func(n string) (rwLock, error) {
				m, err := etcdlock.NewRWMutex(e.NewClient(), n, e.LockOptions()...)
				if err != nil {
					return rwLock{}, err
				}
				return rwLock{read: m.RLocker(), write: m.Locker()}, nil
			}}, nil
	case "consul":
		c, err := consulfake.Start(consulfake.ForceMiniconsul())
		if err != nil {
			return nil, err
		}
		return &backend{name: "miniconsul", close: c.Close,
			lock: func(n string) (rwLock, error) {
				m, err := consullock.NewRWMutex(c.NewClient(), n, c.LockOptions()...)
				if err != nil {
					return rwLock{}, err
				}
				return rwLock{read: m.RLocker(), write: m.Locker()}, nil
			}}, nil
	case "zk":
		z, err := zkfake.Start(zkfake.ForceMinizk())
		if err != nil {
			return nil, err
		}
		return &backend{name: "minizk", close: z.Close,
			lock: func(n string) (rwLock, error) {
				conn, _, err := z.Connect(zkSession)
				if err != nil {
					return rwLock{}, err
				}
				m, err := zklock.NewRWMutex(conn, n, append(z.LockOptions(), locks.WithTTL(zkSession))...)
				if err != nil {
					return rwLock{}, err
				}
				return rwLock{read: m.RLocker(), write: m.Locker()}, nil
			}}, nil
	}
	return nil, fmt.Errorf("%w: backend %q (want %s)", errConfig, name, backends)
}
