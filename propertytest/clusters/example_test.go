package clusters_test

import (
	"testing"

	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/clusters"
)

// Example runs zklock on a lab ZooKeeper ensemble whose leader the suite
// isolates, kills and pauses. It belongs in a test (the lab needs a
// TestMain that calls lab.SandboxMain, and root), so it is not run.
func Example() {
	var t *testing.T // the test's
	c := clusters.ZooKeeper(t)
	propertytest.Run(t, c.ZKLock(), clusters.ZKOptions())
}
