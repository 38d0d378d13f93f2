package backends_test

import (
	"fmt"

	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
)

// The suite on redislock over a miniredis in manual time, outside go test;
// in a test, propertytest.Run(t, backends.RedisLock(), opts) does the same.
func ExampleRedisLock() {
	rep, err := propertytest.RunStandalone(backends.RedisLock(), propertytest.Options{},
		propertytest.Standalone{Name: "redislock", Checks: 3, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d runs, failed: %v\n", rep.Runs, rep.Failed)
	// Output: 3 runs, failed: false
}
