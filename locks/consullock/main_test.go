package consullock

import (
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/internal/locktest"
)

// TestMain fails the package if a test leaves a goroutine behind, except
// the port allocator a real agent starts (fakes.IgnoreConsulPorts). On
// real agents four tests run at once (parallelOnAgents), unless
// -test.parallel says otherwise.
func TestMain(m *testing.M) {
	locktest.WaitingParallel(4)
	fakes.VerifyNoLeaks(m, fakes.IgnoreConsulPorts())
}
