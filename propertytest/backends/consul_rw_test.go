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
	checkedEveryRun(t, rep, propertytest.Exclusivity, propertytest.DeadlockFreedom)
	t.Logf("runs %d, named checks %v", rep.Runs, rep.Checked)
	noExpected(t, rep)
}
