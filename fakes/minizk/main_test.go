package minizk_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: Close
// must end every connection's goroutines, and the tests close their
// clients.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
