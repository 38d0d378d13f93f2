package backends

import (
	"os"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// envConsulAddr names the environment variable that points
// TestConsulLockOnRealServer at a running Consul agent (host:port).
const envConsulAddr = "LOCKPROOF_CONSUL_ADDR"

func TestConsulLockKeepsItsProperties(t *testing.T) {
	rep := propertytest.Run(t, ConsulLock(), ConsulLockOptions())
	checkedEveryRun(t, rep, propertytest.Exclusivity, propertytest.DeadlockFreedom)
	t.Logf("runs %d, named checks %v, expected violations (unclaimed session invalidation) %v", rep.Runs, rep.Checked, rep.Expected)
}

func TestConsulSemaphoreKeepsItsProperties(t *testing.T) {
	o := ConsulLockOptions()
	o.Permits, o.Clients = 2, 4
	rep := propertytest.Run(t, ConsulSemaphore(2), o)
	checkedEveryRun(t, rep, propertytest.Exclusivity, propertytest.DeadlockFreedom)
	t.Logf("runs %d, named checks %v", rep.Runs, rep.Checked)
	noExpected(t, rep)
}

// TestConsulLockOnRealServer runs the suite on the agent at
// LOCKPROOF_CONSUL_ADDR, or else on one started from the consul binary
// consulfake.New finds (LOCKPROOF_CONSUL_BIN, then PATH) with
// session_ttl_min 1s; it is skipped without either.
func TestConsulLockOnRealServer(t *testing.T) {
	addr := os.Getenv(envConsulAddr)
	if addr == "" {
		if consulfake.Binary() == "" {
			t.Skipf("set %s (an agent with session_ttl_min 1s) or %s to run the suite on a real Consul", envConsulAddr, consulfake.EnvBin)
		}
		addr = consulfake.New(t, consulfake.ForceAgent(), consulfake.SessionTTLMin(time.Second)).Addr()
	}
	suitemain.SetChecks(t, 2) // a real agent in real time: each run lasts about 30 s
	propertytest.Run(t, ConsulLockOn(addr), ConsulLockOnOptions())
}

// TestConsulLockOnMiniconsul smoke-tests ConsulLockOn against miniconsul in
// real time, reached by its address: a lock taken and released, the run's
// keys deleted at its end.
func TestConsulLockOnMiniconsul(t *testing.T) {
	c := consulfake.New(t, consulfake.ForceMiniconsul(), consulfake.SessionTTLMin(time.Second))
	t.Run("run", func(t *testing.T) {
		be, err := ConsulLockOn(c.Addr())(t)
		if err != nil {
			t.Fatal(err)
		}
		smokeLock(t, be)
	})
	keys, _, err := c.Client().KV().Keys("lockproof-test-", "", nil)
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys left: %v, %v", keys, err)
	}
}
