package adapter_test

import (
	"testing"

	"github.com/lockproof/lockproof/fakes"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) { fakes.VerifyNoLeaks(m) }
