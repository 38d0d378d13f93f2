package etcdfake_test

import (
	"testing"

	"github.com/lockproof/lockproof/fakes"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// server must stop what it started at Close.
func TestMain(m *testing.M) { fakes.VerifyNoLeaks(m) }
