package propertytest

import "testing"

// The read-write mutex on minizk, clients locking in either mode: no
// violation, by the read-write lease model and the named checks. Five runs
// by default, as TestZKLockKeepsItsProperties.
func TestZKRWMutexKeepsItsProperties(t *testing.T) {
	SetChecks(t, 5)
	rep := Run(t, ZKRWMutex(), Options{ReadWrite: true, Clients: 4})
	if rep.Runs == 0 || rep.Checked[Exclusivity] != rep.Runs || rep.Checked[DeadlockFreedom] != rep.Runs {
		t.Fatalf("checks ran %v in %d runs", rep.Checked, rep.Runs)
	}
	t.Logf("runs %d, named checks %v", rep.Runs, rep.Checked)
	if len(rep.Expected) > 0 {
		t.Errorf("expected violations without unclaimed faults: %v\n%v", rep.Expected, rep.ExpectedExample)
	}
}
