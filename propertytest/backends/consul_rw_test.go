package backends

import (
	"testing"

	"github.com/lockproof/lockproof/propertytest"
)

// The read-write mutex on miniconsul, clients locking in either mode: no
// violation, by the read-write lease model and the named checks.
func TestConsulRWMutexKeepsItsProperties(t *testing.T) {
	o := ConsulLockOptions()
	o.ReadWrite, o.Clients = true, 4
	rep := propertytest.Run(t, ConsulRWMutex(), o)
	if rep.Runs == 0 || rep.Checked[propertytest.Exclusivity] != rep.Runs || rep.Checked[propertytest.DeadlockFreedom] != rep.Runs {
		t.Fatalf("checks ran %v in %d runs", rep.Checked, rep.Runs)
	}
	t.Logf("runs %d, named checks %v", rep.Runs, rep.Checked)
	if len(rep.Expected) > 0 {
		t.Errorf("expected violations without unclaimed faults: %v\n%v", rep.Expected, rep.ExpectedExample)
	}
}
