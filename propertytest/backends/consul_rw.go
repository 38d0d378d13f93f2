package backends

import (
	"github.com/hashicorp/consul/api"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/consullock"
	"github.com/lockproof/lockproof/propertytest"
)

// ConsulRWMutex is the Factory of consullock.NewRWMutexWithSession on
// miniconsul in manual time, as ConsulLock: the same sessions, lock-delay
// and clean-up, each client's Locker the ReadWriteLocker of the mutex's
// two views. Run it with ConsulLockOptions and Options.ReadWrite. Claims:
// the defaults, FaultCrash and FaultPause. It offers no backend fault.
func ConsulRWMutex() propertytest.Factory {
	return onMiniconsul(func(c *api.Client, name string, s consullock.Session, opts ...locks.Option) (locks.Locker, error) {
		m, err := consullock.NewRWMutexWithSession(c, name, s, opts...)
		if err != nil {
			return nil, err
		}
		return propertytest.RWViews(m.RLocker(), m.Locker()), nil
	}, false)
}
