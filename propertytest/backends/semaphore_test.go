package backends

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/propertytest"
)

// A semaphore of N permits checked as one: no violation.
func TestRedisSemaphoreKeepsItsProperties(t *testing.T) {
	rep := propertytest.Run(t, RedisSemaphore(2), propertytest.Options{Permits: 2, Clients: 4})
	checkedEveryRun(t, rep, propertytest.Exclusivity, propertytest.DeadlockFreedom)
	t.Logf("named checks ran (runs): %v", rep.Checked)
	noExpected(t, rep)
}

// A semaphore of 3 permits held to 2 grants a third holder: exclusivity,
// by the model and by the named checks of N holders.
func TestSemaphoreOfMorePermitsBreaksExclusivity(t *testing.T) {
	pinSeed(t, "4") // caught at its first run
	rep := propertytest.Check(t, RedisSemaphore(3), propertytest.Options{Permits: 2, Clients: 4, ShrinkRuns: caughtShrinkRuns})
	caughtAs(t, rep, propertytest.Exclusivity)
}

// A mutex held to two permits refuses a TryLock while one permit is free,
// again and again: progress, by the semaphore model (not deadlock freedom:
// the permit comes free once its holder leaves).
func TestMutexHeldToTwoPermitsRefusesAFreePermit(t *testing.T) {
	pinSeed(t, "6") // about 1 random seed in 13 finds no refusal in the default runs
	rep := propertytest.Check(t, RedisLock(), propertytest.Options{Permits: 2, Clients: 3, ShrinkRuns: caughtShrinkRuns})
	if !rep.Failed || !slices.Contains(rep.Broken(), propertytest.Progress) {
		t.Fatalf("not caught as progress: failed %v, broken %v", rep.Failed, rep.Broken())
	}
	found := false
	for _, v := range rep.Violations {
		found = found || strings.Contains(v.Detail, "semaphore model of 2 permits")
	}
	if !found {
		t.Errorf("no violation names the semaphore model: %v", rep.Violations)
	}
}
