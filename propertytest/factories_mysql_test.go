package propertytest

import (
	"os"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
)

func TestMySQLLockKeepsItsProperties(t *testing.T) {
	rep := Run(t, MySQLLock(), Options{})
	if rep.Runs == 0 || rep.Checked[Exclusivity] != rep.Runs || rep.Checked[DeadlockFreedom] != rep.Runs {
		t.Fatalf("checks ran %v in %d runs", rep.Checked, rep.Runs)
	}
	t.Logf("runs %d, named checks %v, expected violations (unclaimed clock jump) %v", rep.Runs, rep.Checked, rep.Expected)
}

func TestMySQLLockRefusesASecondClock(t *testing.T) {
	if _, err := MySQLLock()(t); err != nil {
		t.Fatal(err)
	}
	if _, err := MySQLLock()(t); err == nil {
		t.Fatal("a second MySQLLock backend shared go-mysql-server's clock")
	}
}

func TestMySQLLockOnRealServer(t *testing.T) {
	dsn := os.Getenv(fakes.EnvMySQLDSN)
	if dsn == "" {
		t.Skipf("set %s to run the suite on a real MySQL", fakes.EnvMySQLDSN)
	}
	setChecks(t, 5)
	Run(t, MySQLLockOn(dsn), Options{TTL: 200 * time.Millisecond})
}
