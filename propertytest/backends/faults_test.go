package backends

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// Single-node Redis does not claim to survive a failover to an
// asynchronously fed replica. Run with that fault anyway, the suite must
// report what breaks as an expected violation, not a failure, and must
// report it as VIOLATED once the lock claims the fault.
func TestRedisFailoverIsAnExpectedViolation(t *testing.T) {
	suitemain.SetChecks(t, 6) // about one run in three fails over while a lease is held
	pinSeed(t, "5")           // four of its six runs break exclusivity across a failover
	rep := propertytest.Check(t, RedisLockWithFailover(time.Second), propertytest.Options{})
	if rep.Failed {
		t.Fatalf("an unclaimed fault failed the run: %v\n%s", rep.Broken(), rep.Output)
	}
	if rep.Expected[propertytest.Exclusivity] == 0 || rep.ExpectedExample == nil {
		t.Fatalf("a failover losing the grant and the fence counter went unnoticed in %d runs (expected: %v)", rep.Runs, rep.Expected)
	}
	ex := rep.ExpectedExample
	if ex.Status() != "expected violation" || len(ex.Unclaimed) == 0 {
		t.Errorf("expected violation not labelled as such: %s", ex)
	}
	t.Logf("%d of %d runs: %s", rep.Expected[propertytest.Exclusivity], rep.Runs, ex.Detail)
}

func TestRedisFailoverClaimedIsViolated(t *testing.T) {
	suitemain.SetChecks(t, 200) // stops at the first failure
	pinSeed(t, "8")             // its first run fails over while a lease is held
	rep := propertytest.Check(t, RedisLockWithFailover(time.Second), propertytest.Options{
		Claims:     []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultPause, propertytest.FaultFailover},
		ShrinkRuns: caughtShrinkRuns,
	})
	if !rep.Failed {
		t.Fatalf("a lock claiming failover safety survived a lossy failover in %d runs", rep.Runs)
	}
	if b := rep.Broken(); len(b) == 0 || b[0] != propertytest.Exclusivity {
		t.Fatalf("broken %v, want exclusivity\n%s", b, rep.Output)
	}
}

// Redlock keeps working with a minority of its nodes down, and stays safe
// under node stops; without fencing tokens it does not claim pauses. A run
// on three miniredis nodes takes about a second, so the default go test
// makes 5 runs; CI makes the package default of 15 (.ci/run step 2 gives
// -rapid.checks=15), LOCKPROOF_DEEP=1 500.
func TestRedlockAvailableWithMinorityDown(t *testing.T) {
	suitemain.SetChecks(t, 5)
	rep := propertytest.Run(t, Redlock(3), propertytest.Options{Claims: []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultNodeDown}})
	if rep.Runs == 0 {
		t.Fatal("no run")
	}
	if rep.Checked[propertytest.Availability] != rep.Runs || rep.Checked[propertytest.DeadlockFreedom] != rep.Runs {
		t.Fatalf("availability checked in %d and deadlock freedom in %d of %d runs", rep.Checked[propertytest.Availability], rep.Checked[propertytest.DeadlockFreedom], rep.Runs)
	}
	t.Logf("expected violations (unfenced under pauses): %v", rep.Expected)
}

// redislock claims safety under partitions and lost replies: operations
// of a cut-off client have unknown outcomes, and its lease runs out. Each
// run waits out cut-off reads in wall time (netTimeout each; 0.1 to 0.7 s
// a run), so the default go test makes 5 runs; LOCKPROOF_DEEP=1 500, and
// lockproof check's redislock/network cell as many as its budget buys.
func TestRedisLockUnderNetworkFaults(t *testing.T) {
	suitemain.SetChecks(t, 5)
	rep := propertytest.Run(t, RedisLockWithNetworkFaults(), propertytest.Options{
		TTL:       100 * time.Millisecond, // RequestTimeout TTL/10: a cut-off waiter gives up in 10 ms of wall time
		OpTimeout: 30 * time.Millisecond,
		Settle:    5 * time.Millisecond,
		Claims:    []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultPause, propertytest.FaultPartition},
	})
	if len(rep.Expected) > 0 {
		t.Errorf("expected violations with every fault claimed: %v", rep.Expected)
	}
}
