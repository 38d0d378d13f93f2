package propertytest

import (
	"os"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
)

// Each run lasts about a second on minizk (go-zookeeper reconnects after
// the holder's session expires on the wall clock), so the default go test
// makes 5 runs; CI makes the package default of 15 (.ci/run step 2 gives
// -rapid.checks=15), LOCKPROOF_DEEP=1 500.
func TestZKLockKeepsItsProperties(t *testing.T) {
	SetChecks(t, 5)
	rep := Run(t, ZKLock(), Options{})
	if rep.Runs == 0 || rep.Checked[Exclusivity] != rep.Runs || rep.Checked[DeadlockFreedom] != rep.Runs {
		t.Fatalf("checks ran %v in %d runs", rep.Checked, rep.Runs)
	}
	t.Logf("runs %d, named checks %v, expected violations (unclaimed session expiry) %v", rep.Runs, rep.Checked, rep.Expected)
}

// TestZKLockOnRealServer runs the suite on the ZooKeeper server at
// LOCKPROOF_ZK_ADDR, which must grant sessions of 1s (CI's, tickTime 200ms,
// does); it is skipped without one.
func TestZKLockOnRealServer(t *testing.T) {
	addr := os.Getenv(fakes.EnvZKAddr)
	if addr == "" {
		t.Skipf("set %s (a server granting 1s sessions) to run the suite on a real ZooKeeper", fakes.EnvZKAddr)
	}
	SetChecks(t, 3) // a real server in real time: each run lasts seconds
	setSteps(t, 10)
	Run(t, ZKLockOn(addr), ZKLockOnOptions())
}

// TestZKLockOnMinizk smoke-tests ZKLockOn against minizk in real time,
// reached by its address: a lock taken and released, the run's nodes
// deleted at its end.
func TestZKLockOnMinizk(t *testing.T) {
	z := fakes.ZooKeeper(t, fakes.ForceMinizk(), fakes.ZooKeeperTickTime(100*time.Millisecond))
	t.Run("run", func(t *testing.T) {
		be, err := ZKLockOn(z.Addr())(t)
		if err != nil {
			t.Fatal(err)
		}
		smokeLock(t, be)
	})
	kids, err := z.Minizk().Children("/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		if k != "zookeeper" {
			t.Fatalf("nodes left under /: %v", kids)
		}
	}
}
