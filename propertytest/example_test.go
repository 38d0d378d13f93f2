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

// A Factory for your own lock: it builds a fresh backend for each run
// (here one fakes.MemLock per lock name, which every client shares, on a
// manual clock the suite advances), and says how to make a Locker on it.
// Pass it to Run in a test; RunStandalone runs it outside one, as here.
// The second factory gives each client a lock of its own, as a
// process-local mutex does across processes: the suite finds two holders.
func ExampleFactory() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mine := func(propertytest.Env) (*propertytest.Backend, error) {
		clock := fakes.NewClock(start)
		shared := map[string]*fakes.MemLock{} // the "server": one lock per name
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				if l, ok := shared[name]; ok {
					return l, nil
				}
				l, err := fakes.NewMemLock(name, append([]locks.Option{locks.WithClock(clock)}, opts...)...)
				if err != nil {
					return nil, err
				}
				shared[name] = l
				return l, nil
			},
			Clock:   clock,
			Advance: clock.Advance,
			// Every client reaches the lock in memory, none over a
			// socket: the suite's scheduler need not wait for the
			// network to see that nothing moves.
			InProcess: true,
		}, nil
	}
	rep, err := propertytest.RunStandalone(mine, propertytest.Options{}, propertytest.Standalone{Name: "mine", Checks: 5, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("shared lock: %d runs, failed: %v\n", rep.Runs, rep.Failed)

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
	rep, err = propertytest.RunStandalone(perClient, propertytest.Options{}, propertytest.Standalone{Name: "per-client", Checks: 5, Seed: 1, ShrinkTime: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("a lock per client: failed: %v, exclusivity broken: %v\n", rep.Failed, slices.Contains(rep.Broken(), propertytest.Exclusivity))
	// Output:
	// shared lock: 5 runs, failed: false
	// a lock per client: failed: true, exclusivity broken: true
}
