package adapter_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/propertytest"
)

// The Example's lock with a release that deletes the key whoever owns it
// (a holder whose lease ran out frees its successor's lock) is caught
// through the kit: the Example's pass is not for want of power.
func TestExampleLockCarelessReleaseIsCaught(t *testing.T) {
	careful := myRelease
	myRelease = redis.NewScript(`return redis.call("DEL", KEYS[1])`)
	defer func() { myRelease = careful }()
	rep, err := propertytest.RunStandalone(myFactory,
		propertytest.Options{Claims: []propertytest.FaultKind{propertytest.FaultCrash}},
		propertytest.Standalone{Name: "mylock-careless", Checks: 100, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Failed {
		t.Fatalf("a release that deletes another owner's key passed %d runs", rep.Runs)
	}
	t.Logf("caught at run %d: %v", rep.FirstFailure, rep.Broken())
}
