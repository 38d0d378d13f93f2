package fakes_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every fake
// must stop what it started at cleanup.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
