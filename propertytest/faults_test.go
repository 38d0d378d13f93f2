package propertytest

import (
	"testing"
	"time"
)

// Single-node Redis does not claim to survive a failover to an
// asynchronously fed replica. Run with that fault anyway, the suite must
// report what breaks as an expected violation, not a failure, and must
// report it as VIOLATED once the lock claims the fault.
func TestRedisFailoverIsAnExpectedViolation(t *testing.T) {
	SetChecks(t, 30) // about one run in three fails over while a lease is held
	rep := Check(t, RedisLockWithFailover(time.Second), Options{})
	if rep.Failed {
		t.Fatalf("an unclaimed fault failed the run: %v\n%s", rep.Broken(), rep.Output)
	}
	if rep.Expected[Exclusivity] == 0 || rep.ExpectedExample == nil {
		t.Fatalf("a failover losing the grant and the fence counter went unnoticed in %d runs (expected: %v)", rep.Runs, rep.Expected)
	}
	ex := rep.ExpectedExample
	if ex.Status() != "expected violation" || len(ex.Unclaimed) == 0 {
		t.Errorf("expected violation not labelled as such: %s", ex)
	}
	t.Logf("%d of %d runs: %s", rep.Expected[Exclusivity], rep.Runs, ex.Detail)
}

func TestRedisFailoverClaimedIsViolated(t *testing.T) {
	SetChecks(t, 200) // stops at the first failure
	rep := Check(t, RedisLockWithFailover(time.Second), Options{
		Claims: []FaultKind{FaultCrash, FaultPause, FaultFailover},
	})
	if !rep.Failed {
		t.Fatalf("a lock claiming failover safety survived a lossy failover in %d runs", rep.Runs)
	}
	if b := rep.Broken(); len(b) == 0 || b[0] != Exclusivity {
		t.Fatalf("broken %v, want exclusivity\n%s", b, rep.Output)
	}
}

// Redlock keeps working with a minority of its nodes down, and stays safe
// under node stops; without fencing tokens it does not claim pauses. A run
// on three miniredis nodes takes about a second, so the default go test
// makes 5 runs; CI makes the package default of 15 (.ci/run step 2 gives
// -rapid.checks=15), LOCKPROOF_DEEP=1 500.
func TestRedlockAvailableWithMinorityDown(t *testing.T) {
	SetChecks(t, 5)
	rep := Run(t, Redlock(3), Options{Claims: []FaultKind{FaultCrash, FaultNodeDown}})
	if rep.Runs == 0 {
		t.Fatal("no run")
	}
	if rep.Checked[Availability] != rep.Runs || rep.Checked[DeadlockFreedom] != rep.Runs {
		t.Fatalf("availability checked in %d and deadlock freedom in %d of %d runs", rep.Checked[Availability], rep.Checked[DeadlockFreedom], rep.Runs)
	}
	t.Logf("expected violations (unfenced under pauses): %v", rep.Expected)
}

// redislock claims safety under partitions and lost replies: operations
// of a cut-off client have unknown outcomes, and its lease runs out. Each
// run waits out cut-off operations in wall time (about 2 s a run), so the
// default go test makes 2 runs; LOCKPROOF_DEEP=1 500, and lockproof
// check's redislock/network cell as many as its budget buys.
func TestRedisLockUnderNetworkFaults(t *testing.T) {
	SetChecks(t, 2)
	rep := Run(t, RedisLockWithNetworkFaults(), Options{
		TTL:       100 * time.Millisecond, // RequestTimeout TTL/10: a cut-off waiter gives up in 10 ms of wall time
		OpTimeout: 30 * time.Millisecond,
		Settle:    5 * time.Millisecond,
		Claims:    []FaultKind{FaultCrash, FaultPause, FaultPartition},
	})
	if len(rep.Expected) > 0 {
		t.Errorf("expected violations with every fault claimed: %v", rep.Expected)
	}
}
