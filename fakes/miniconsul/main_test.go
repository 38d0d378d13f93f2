package miniconsul_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: Close must
// stop every handler, and the tests close their clients' idle connections.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
