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
