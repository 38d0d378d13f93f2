package fakes_test

import (
	"testing"

	"github.com/lockproof/lockproof/fakes"
)

// TestMain fails the package if a test leaves a goroutine behind: every fake
// must stop what it started at cleanup; fakes.IgnoreConsulPorts allows for
// sdk/testutil's port allocator, which never stops.
func TestMain(m *testing.M) { fakes.VerifyNoLeaks(m, fakes.IgnoreConsulPorts()) }
