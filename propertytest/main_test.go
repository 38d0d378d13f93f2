package propertytest

import "testing"

// TestMain runs with the suite's short defaults (see Main); LOCKPROOF_DEEP=1
// runs 500 checks per property test instead.
func TestMain(m *testing.M) { Main(m) }

// caughtShrinkRuns bounds the shrinking of the tests that assert only that
// a broken lock is caught, and as which property: the first failing run
// already names it, and on a backend over TCP each of the default 200
// shrink runs costs milliseconds of quiescence (the failover test spent
// most of its 6.6 s shrinking).
const caughtShrinkRuns = 20
