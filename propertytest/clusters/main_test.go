package clusters

import (
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/lab"
)

// TestMain re-runs the tests inside a sandbox network namespace when the
// lab is available (LOCKPROOF_LAB=1, root), and fails the package if a
// test leaves a goroutine behind.
func TestMain(m *testing.M) {
	lab.SandboxMain()
	fakes.VerifyNoLeaks(m)
}
