package backends

import (
	"testing"

	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// TestMain runs with the suite's short defaults and leak check (see
// suitemain.Main); LOCKPROOF_DEEP=1 runs 500 checks per property test.
//
// The tests on the embedded etcd (real time) and those of zklock over
// sockets (which wait for the network) mostly wait: they run in a second
// process (suitemain.Beside), beside the others, which need the process
// to themselves as well. TestBeside collects them.
func TestMain(m *testing.M) {
	suitemain.Main(m, suitemain.Beside(`^TestEtcd|^TestZKLock(OnAllLinkFaults|UnderNetworkFaults)$`))
}

// TestBeside collects the tests TestMain runs in a second process.
func TestBeside(t *testing.T) { suitemain.Collect(t) }

// caughtShrinkRuns bounds the shrinking of the tests that assert only that
// a broken lock is caught, and as which property: the first failing run
// already names it, and on a backend over TCP each of the default 200
// shrink runs costs milliseconds of quiescence.
const caughtShrinkRuns = 20

// pinSeed starts the default run of a test at seed, one whose first runs
// show what the test asserts, instead of a random one that may need many;
// LOCKPROOF_DEEP=1 keeps the random seeds.
func pinSeed(t *testing.T, seed string) {
	t.Helper()
	if !suitemain.Deep() {
		suitemain.SetFlag(t, "rapid.seed", seed)
	}
}
