package thirdparty_test

import (
	"testing"

	"github.com/lockproof/lockproof/propertytest"
)

// TestMain runs with the suite's short defaults (propertytest.Main). The
// leak check leaves out the goroutines the libraries below keep after a
// crash by design: kvtools/consul's session renewer retries for ever once
// its connections are gone; consul/api's RenewPeriodic, started by
// api.Semaphore for its session, retries a crashed client's renewals for
// up to the session's TTL of wall time.
func TestMain(m *testing.M) {
	propertytest.Main(m, propertytest.IgnorePackages("github.com/kvtools/consul", "github.com/hashicorp/consul/api"))
}
