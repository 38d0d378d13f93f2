package consullock

import (
	"testing"

	"github.com/lockproof/lockproof/fakes"
)

// TestMain fails the package if a test leaves a goroutine behind, except
// the port allocator a real agent starts (fakes.IgnoreConsulPorts).
func TestMain(m *testing.M) { fakes.VerifyNoLeaks(m, fakes.IgnoreConsulPorts()) }
