package backends

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/zklock"
	"github.com/lockproof/lockproof/propertytest"
)

// ZKRWMutex is the Factory of zklock.NewRWMutex on minizk in manual time,
// as ZKLock (the same clients, each with a connection of its own, and
// sessions of an hour); each Locker is the ReadWriteLocker of the lock's
// two views. Run it with Options.ReadWrite. Claims: the defaults,
// FaultCrash and FaultPause. It offers no backend fault.
func ZKRWMutex() propertytest.Factory { return onMinizk(zkRWMutex, false) }

// ZKRWMutexOn is ZKRWMutex on the real ZooKeeper server at addr, as
// ZKLockOn (real time, a connection per Locker whose session timeout is
// its TTL, ZKLockOnOptions); run it with Options.ReadWrite set too.
func ZKRWMutexOn(addr string) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		if addr == "" {
			return nil, errors.New("backends: ZKRWMutexOn needs the server's address")
		}
		z, err := zkfake.Start(zkfake.At(addr))
		if err != nil {
			return nil, fmt.Errorf("backends: %w", err)
		}
		propertytest.CloseAtCleanup(env, "the ZooKeeper fake", z)
		be := newZKBackend(z, zkRWMutex, func(_ int, ttl time.Duration) (*zk.Conn, error) {
			c, _, err := z.Connect(ttl)
			return c, err
		})
		be.Clock, be.Advance = locks.SystemClock{}, time.Sleep
		return be.Backend, nil
	}
}

// zkRWMutex is the newZKLocker of zklock.NewRWMutex: its two views.
func zkRWMutex(conn *zk.Conn, name string, opts ...locks.Option) (locks.Locker, error) {
	m, err := zklock.NewRWMutex(conn, name, opts...)
	if err != nil {
		return nil, err
	}
	return propertytest.RWViews(m.RLocker(), m.Locker()), nil
}
