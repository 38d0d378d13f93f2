package propertytest_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
)

// Run the suite on redislock over a manual-time miniredis, in a test.
func ExampleRun() {
	_ = func(t *testing.T) {
		rep := propertytest.Run(t, backends.RedisLock(), propertytest.Options{
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

// myLockFactory builds a fresh backend for each run of the suite. Here the
// "server" is a map holding one fakes.MemLock per lock name, shared by every
// client; put your own lock's server and clients in its place.
func myLockFactory(propertytest.Env) (*propertytest.Backend, error) {
	clock := fakes.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	server := map[string]*fakes.MemLock{}
	return &propertytest.Backend{
		NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
			if l, ok := server[name]; ok {
				return l, nil
			}
			l, err := fakes.NewMemLock(name, append([]locks.Option{locks.WithClock(clock)}, opts...)...)
			if err != nil {
				return nil, err
			}
			server[name] = l
			return l, nil
		},
		Clock:     clock, // a manual clock: the suite moves time, nothing sleeps
		Advance:   clock.Advance,
		InProcess: true, // clients reach the server in memory, not over a socket
	}, nil
}

// A Factory for your own lock, run outside a test; in a test it is
// propertytest.Run(t, myLockFactory, propertytest.Options{}).
func ExampleFactory() {
	rep, err := propertytest.RunStandalone(myLockFactory, propertytest.Options{},
		propertytest.Standalone{Name: "mine", Checks: 5, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d runs, failed: %v\n", rep.Runs, rep.Failed)
	// Output: 5 runs, failed: false
}

// A Factory that gives each client a lock of its own, as a process-local
// mutex does across processes: the suite finds two holders.
func ExampleFactory_lockPerClient() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	perClient := func(propertytest.Env) (*propertytest.Backend, error) {
		clock := fakes.NewClock(start)
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				return fakes.NewMemLock(name, append([]locks.Option{locks.WithClock(clock)}, opts...)...)
			},
			Clock:     clock,
			Advance:   clock.Advance,
			InProcess: true,
		}, nil
	}
	rep, err := propertytest.RunStandalone(perClient, propertytest.Options{},
		propertytest.Standalone{Name: "per-client", Checks: 5, Seed: 1, ShrinkTime: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("failed: %v, exclusivity broken: %v\n", rep.Failed, slices.Contains(rep.Broken(), propertytest.Exclusivity))
	// Output: failed: true, exclusivity broken: true
}
