package propertytest

import "testing"

// TestMain runs with the suite's short defaults (see Main); LOCKPROOF_DEEP=1
// runs 500 checks per property test instead.
func TestMain(m *testing.M) { Main(m) }
