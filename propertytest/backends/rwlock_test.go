package backends

import (
	"testing"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/redis/go-redis/v9"
)

// The read-write mutex on Redis, clients locking in either mode: no
// violation, by the read-write lease model and the named checks.
func TestRedisRWMutexKeepsItsProperties(t *testing.T) {
	rep := propertytest.Run(t, RedisRWMutex(), propertytest.Options{ReadWrite: true, Clients: 4})
	checkedEveryRun(t, rep, propertytest.Exclusivity, propertytest.DeadlockFreedom)
	t.Logf("named checks ran (runs): %v", rep.Checked)
	noExpected(t, rep)
}

// A semaphore of two permits posing as a read-write lock (its permits
// taken in either mode) lets two writers hold at once: exclusivity.
func TestSemaphoreAsRWLockBreaksExclusivity(t *testing.T) {
	sem := OnMiniredis(func(c redis.UniversalClient, name string, opts ...locks.Option) (locks.Locker, error) {
		s, err := redislock.NewSemaphore(c, name, 2, opts...)
		if err != nil {
			return nil, err
		}
		return propertytest.RWViews(s, s), nil
	})
	rep := propertytest.Check(t, sem, propertytest.Options{ReadWrite: true, Clients: 3, ShrinkRuns: caughtShrinkRuns})
	caughtAs(t, rep, propertytest.Exclusivity)
}
