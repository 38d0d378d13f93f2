package backends

import (
	"testing"

	"github.com/lockproof/lockproof/propertytest"
)

// The correct locks pass: no property they claim is violated.

func TestRedisLockKeepsItsProperties(t *testing.T) {
	rep := propertytest.Run(t, RedisLock(), propertytest.Options{})
	checkedEveryRun(t, rep, propertytest.Exclusivity, propertytest.DeadlockFreedom)
	t.Logf("named checks ran (runs): %v", rep.Checked)
	if len(rep.Expected) > 0 {
		t.Errorf("redislock with fencing had expected violations without unclaimed faults: %v\n%v", rep.Expected, rep.ExpectedExample)
	}
}

func TestMemLockKeepsItsProperties(t *testing.T) {
	rep := propertytest.Run(t, MemLock(), propertytest.Options{})
	if len(rep.Expected) > 0 {
		t.Errorf("memlock had expected violations without unclaimed faults: %v", rep.Expected)
	}
}
