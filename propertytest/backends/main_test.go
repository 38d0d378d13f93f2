package backends

import (
	"testing"

	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// TestMain runs with the suite's short defaults and leak check (see
// suitemain.Main); LOCKPROOF_DEEP=1 runs 500 checks per property test.
func TestMain(m *testing.M) { suitemain.Main(m) }

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
