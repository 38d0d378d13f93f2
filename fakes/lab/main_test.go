package lab

import (
	"testing"

	"github.com/lockproof/lockproof/fakes"
)

// TestMain re-runs the tests inside a sandbox network namespace when the lab
// is available (LOCKPROOF_LAB=1, root), and fails the package if a test
// leaves a goroutine behind.
func TestMain(m *testing.M) {
	SandboxMain()
	fakes.VerifyNoLeaks(m)
}

// needLab skips t unless the lab can run, and fails it if the lab is
// available but this process is not in a sandbox (SandboxMain must have
// put it there).
func needLab(t *testing.T) {
	t.Helper()
	if reason := Unavailable(); reason != "" {
		t.Skip(reason)
	}
	if !InSandbox() {
		t.Fatal("the lab is available but the tests are not in a sandbox: SandboxMain did not run")
	}
}
