package consullock

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind. One
// exception: on a real agent, sdk/testutil's port allocator (freeport) starts
// a goroutine on first use that runs until the process exits.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/consul/sdk/freeport.checkFreedPorts"))
}
