package propertytest

import (
	"slices"
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
		Claims:     []FaultKind{FaultCrash, FaultPause, FaultFailover},
		ShrinkRuns: caughtShrinkRuns,
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
// run waits out cut-off reads in wall time (netTimeout each; 0.1 to 0.7 s
// a run), so the default go test makes 5 runs; LOCKPROOF_DEEP=1 500, and
// lockproof check's redislock/network cell as many as its budget buys.
func TestRedisLockUnderNetworkFaults(t *testing.T) {
	SetChecks(t, 5)
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

// The faults still active at the end of a run heal in the order of their
// index in every replay (Redlock on five nodes ends a run with up to two
// nodes down).
func TestFinishHealsTheFaultsInOrder(t *testing.T) {
	for range 20 {
		be, err := MemLock()(t)
		if err != nil {
			t.Fatal(err)
		}
		var healed []int
		for i := range 4 {
			be.Faults = append(be.Faults, Fault{Name: "fault " + string(rune('0'+i)), Kind: FaultNodeDown,
				Inject: func() error { return nil }, Heal: func() error { healed = append(healed, i); return nil }})
		}
		o, err := (Options{Clients: 2, TTL: time.Second, Name: "x", Claims: []FaultKind{FaultCrash, FaultNodeDown}}).withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		m, err := newMachine(o, be, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{2, 0, 3, 1} {
			if err := m.toggleFault(i); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.finish(); err != nil {
			t.Fatal(err)
		}
		if want := []int{0, 1, 2, 3}; !slices.Equal(healed, want) {
			t.Fatalf("healed %v, want %v", healed, want)
		}
	}
}
