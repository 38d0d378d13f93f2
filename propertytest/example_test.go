package propertytest_test

import (
	"fmt"
	"testing"

	"github.com/lockproof/lockproof/propertytest"
)

// Run the suite on redislock over a manual-time miniredis, in a test.
func ExampleRun() {
	_ = func(t *testing.T) {
		rep := propertytest.Run(t, propertytest.RedisLock(), propertytest.Options{
			Clients: 3,
			Claims:  []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultPause},
		})
		t.Logf("%d runs, expected violations: %v", rep.Runs, rep.Expected)
	}
}

// A violation under a fault the lock does not claim is expected.
func ExampleViolation_Status() {
	v := propertytest.Violation{
		Property:  propertytest.Exclusivity,
		Expected:  true,
		Unclaimed: []string{"promote the replica (failover)"},
		Detail:    "a grant while the lease of another owner could not yet have expired",
	}
	fmt.Println(v.Status())
	fmt.Println(v)
	// Output:
	// expected violation
	// exclusivity: expected violation: a grant while the lease of another owner could not yet have expired
	// under unclaimed faults: promote the replica (failover)
}
