package propertytest

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/redis/go-redis/v9"
)

// The read-write mutex on Redis, clients locking in either mode: no
// violation, by the read-write lease model and the named checks.
func TestRedisRWMutexKeepsItsProperties(t *testing.T) {
	rep := Run(t, RedisRWMutex(), Options{ReadWrite: true, Clients: 4})
	if rep.Runs == 0 || rep.Checked[Exclusivity] != rep.Runs || rep.Checked[DeadlockFreedom] != rep.Runs {
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
	sem := onOneMiniredis(func(c redis.UniversalClient, name string, opts ...locks.Option) (locks.Locker, error) {
		s, err := redislock.NewSemaphore(c, name, 2, opts...)
		if err != nil {
			return nil, err
		}
		return RWViews(s, s), nil
	})
	rep := Check(t, sem, Options{ReadWrite: true, Clients: 3, ShrinkRuns: caughtShrinkRuns})
	if !rep.Failed || !slices.Contains(rep.Broken(), Exclusivity) {
		t.Fatalf("not caught as exclusivity: failed %v, broken %v", rep.Failed, rep.Broken())
	}
	for _, v := range rep.Violations {
		t.Logf("caught at run %d: %s: %s", rep.FirstFailure, v.Property, v.Detail)
	}
}

func TestReadWriteValidated(t *testing.T) {
	if _, err := (Options{ReadWrite: true, Permits: 2, Clients: 3}).withDefaults(); err == nil {
		t.Error("ReadWrite with 2 permits accepted")
	}
	m, err := newMachine(Options{ReadWrite: true, Clients: 2, TTL: 1e9, Name: "x"}, &Backend{
		NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) { return fakes.NewMemLock(name, opts...) },
		Clock:     fakes.NewClock(epoch),
	}, 1)
	if err == nil || !strings.Contains(err.Error(), "ReadWriteLocker") {
		t.Errorf("a Locker that is no ReadWriteLocker: machine %v, err %v", m != nil, err)
	}
}
