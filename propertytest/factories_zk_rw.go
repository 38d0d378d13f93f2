package propertytest

import (
	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/zklock"
)

// ZKRWMutex is the Factory of zklock.NewRWMutex on minizk in manual time,
// as ZKLock (the same clients, each with a connection of its own, and
// sessions of an hour); each Locker is the ReadWriteLocker of the lock's
// two views. Run it with Options.ReadWrite. Claims: the defaults,
// FaultCrash and FaultPause. It offers no backend fault.
func ZKRWMutex() Factory {
	return onMinizk(func(conn *zk.Conn, name string, opts ...locks.Option) (locks.Locker, error) {
		m, err := zklock.NewRWMutex(conn, name, opts...)
		if err != nil {
			return nil, err
		}
		return RWViews(m.RLocker(), m.Locker()), nil
	}, false)
}
