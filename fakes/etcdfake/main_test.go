package etcdfake_test

import (
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/internal/locktest"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// server must stop what it started at Close. The parallel tests wait on
// embedded members in real time, so more of them run at once than there
// are processors.
func TestMain(m *testing.M) {
	locktest.WaitingParallel(8)
	fakes.VerifyNoLeaks(m)
}
