package backends

import (
	"slices"
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
	if rep.Runs == 0 || rep.Checked[propertytest.Exclusivity] != rep.Runs || rep.Checked[propertytest.DeadlockFreedom] != rep.Runs {
		t.Fatalf("checks ran %v in %d runs", rep.Checked, rep.Runs)
	}
	t.Logf("named checks ran (runs): %v", rep.Checked)
	if len(rep.Expected) > 0 {
		t.Errorf("expected violations without unclaimed faults: %v\n%v", rep.Expected, rep.ExpectedExample)
	}
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
	if !rep.Failed || !slices.Contains(rep.Broken(), propertytest.Exclusivity) {
		t.Fatalf("not caught as exclusivity: failed %v, broken %v", rep.Failed, rep.Broken())
	}
	for _, v := range rep.Violations {
		t.Logf("caught at run %d: %s: %s", rep.FirstFailure, v.Property, v.Detail)
	}
}
