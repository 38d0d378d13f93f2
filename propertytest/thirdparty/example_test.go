package thirdparty_test

import (
	"fmt"

	"github.com/lockproof/lockproof/propertytest"
)

// Running the suite on a third-party lock outside go test: redsync, on
// miniredis in manual time, with the claims redsync makes (mutual exclusion
// across client crashes; no fencing token, so no claim about paused
// holders). Violations under pauses are expected, not failures.
func Example() {
	rep, err := propertytest.RunStandalone(redsyncLock(),
		propertytest.Options{Claims: []propertytest.FaultKind{propertytest.FaultCrash}},
		propertytest.Standalone{Name: "redsync", Checks: 3, Seed: 42})
	if err != nil {
		fmt.Println("no verdict:", err)
		return
	}
	fmt.Printf("runs %d, a claimed property broken: %v\n", rep.Runs, rep.Failed)
	// Output: runs 3, a claimed property broken: false
}
