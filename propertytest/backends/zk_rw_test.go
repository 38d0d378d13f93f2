package backends

import (
	"os"
	"testing"

	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// The read-write mutex on minizk, clients locking in either mode: no
// violation, by the read-write lease model and the named checks. Five runs
// by default, as TestZKLockKeepsItsProperties.
func TestZKRWMutexKeepsItsProperties(t *testing.T) {
	suitemain.SetChecks(t, 5)
	rep := propertytest.Run(t, ZKRWMutex(), propertytest.Options{ReadWrite: true, Clients: 4})
	checkedEveryRun(t, rep, propertytest.Exclusivity, propertytest.DeadlockFreedom)
	t.Logf("runs %d, named checks %v", rep.Runs, rep.Checked)
	noExpected(t, rep)
}

// TestZKRWMutexOnRealServer runs the read-write suite on the ZooKeeper
// server at LOCKPROOF_ZK_ADDR, as TestZKLockOnRealServer; it is skipped
// without one.
func TestZKRWMutexOnRealServer(t *testing.T) {
	addr := os.Getenv(zkfake.EnvAddr)
	if addr == "" {
		t.Skipf("set %s (a server granting 1s sessions) to run the read-write suite on a real ZooKeeper", zkfake.EnvAddr)
	}
	suitemain.SetChecks(t, 3)
	setSteps(t, 10)
	o := ZKLockOnOptions()
	o.ReadWrite, o.Clients = true, 4
	propertytest.Run(t, ZKRWMutexOn(addr), o)
}
