package propertytest

import (
	"os"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
)

// envConsulAddr names the environment variable that points
// TestConsulLockOnRealServer at a running Consul agent (host:port).
const envConsulAddr = "LOCKPROOF_CONSUL_ADDR"

// consulOptions are ConsulLock's: a crashed holder's lock is free 3×TTL
// after its last renewal.
var consulOptions = Options{Slack: 2*time.Second + time.Second/4}

func TestConsulLockKeepsItsProperties(t *testing.T) {
	rep := Run(t, ConsulLock(), consulOptions)
	if rep.Runs == 0 || rep.Checked[Exclusivity] != rep.Runs || rep.Checked[DeadlockFreedom] != rep.Runs {
		t.Fatalf("checks ran %v in %d runs", rep.Checked, rep.Runs)
	}
	t.Logf("runs %d, named checks %v, expected violations (unclaimed session invalidation) %v", rep.Runs, rep.Checked, rep.Expected)
}

// TestConsulLockOnRealServer runs the suite on the agent at
// LOCKPROOF_CONSUL_ADDR, or else on one started from the consul binary
// fakes.Consul finds (LOCKPROOF_CONSUL_BIN, then PATH) with
// session_ttl_min 1s; it is skipped without either.
func TestConsulLockOnRealServer(t *testing.T) {
	addr := os.Getenv(envConsulAddr)
	if addr == "" {
		if fakes.ConsulBinary() == "" {
			t.Skipf("set %s (an agent with session_ttl_min 1s) or %s to run the suite on a real Consul", envConsulAddr, fakes.EnvConsulBin)
		}
		addr = fakes.Consul(t, fakes.ForceConsulAgent(), fakes.ConsulSessionTTLMin(time.Second)).Addr()
	}
	setChecks(t, 3)
	Run(t, ConsulLockOn(addr), Options{TTL: time.Second, Slack: 3 * time.Second})
}
