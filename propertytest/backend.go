package propertytest

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// Factory builds a fresh Backend for one run of the state machine. It is
// called once per rapid test case (and again while rapid shrinks) with the
// run's Env; an error ends the run (Run fails the test, RunStandalone
// returns ErrNoVerdict).
type Factory func(env Env) (*Backend, error)

// Env is what a Factory gets from the run it builds a backend for: the
// suite's own, whose clean-ups run at the end of the run (not of the
// test), so that the servers, connections and proxies of finished runs do
// not pile up while rapid runs and shrinks. *testing.T satisfies it, for
// a factory called directly in a test.
type Env interface {
	// Cleanup registers f to run at the end of the run, last registered
	// first.
	Cleanup(f func())
	// Logf adds a line to the run's log (the test's log in Run and Check,
	// Standalone.Log and Report.Output in RunStandalone).
	Logf(format string, args ...any)
}

var _ Env = (*testing.T)(nil)

// Backend is one lock backend for one run, with the controls the suite
// drives. NewLocker, Clock and Advance are required.
type Backend struct {
	// NewLocker returns the Locker of one client, on a connection of its
	// own, for the lock called name. It must pass opts (TTL, watchdog off,
	// the suite's Observer, which CrashInTryLock needs) to the lock's
	// constructor after the backend's own options (prefix, clock), so that
	// the suite's settings win. An observer among the backend's options
	// (a chaos pause hook) keeps working: locks.WithObserver adds
	// observers, and the suite's is called after it.
	NewLocker func(name string, opts ...locks.Option) (locks.Locker, error)
	// Clock is the manual clock the lockers and the backend follow; the
	// suite stamps every operation with it.
	Clock locks.Clock
	// Advance moves the backend's time and Clock forward by d.
	Advance func(d time.Duration)
	// Nodes is the number of independent backend nodes the lock takes a
	// quorum of (Redlock's Redis nodes); 1 when zero. Availability is
	// checked when it is at least 3 and StopNode is set. A replicated
	// backend that holds one copy of the lock (etcd, Consul, ZooKeeper
	// clusters) is one node here.
	Nodes int
	// StopNode and StartNode stop node i and start it again with its data,
	// for the availability check. Optional.
	StopNode, StartNode func(i int)
	// Faults are the backend faults the state machine may inject.
	Faults []Fault
	// Close, if set, releases the backend at the end of the run.
	Close func()
	// InProcess reports that every connection of the run, the lockers'
	// and the faults', is an in-memory one of the fakes (no socket): a
	// request in flight is then a runnable goroutine, and the suite's
	// scheduler tells that nothing can move from the runtime's counters
	// alone, without waiting wall time for the kernel to deliver. Leave
	// it false if any client uses a socket: the run is slower, but a
	// request still in the kernel is not mistaken for none.
	InProcess bool

	_ struct{} // keyed literals only
}

// ReadWriteLocker is the Locker a Backend makes for a run with
// Options.ReadWrite: its Lock and TryLock take the exclusive (write) lease,
// and RLocker is the same client's Locker of shared (read) leases on the
// same lock.
type ReadWriteLocker interface {
	locks.Locker
	// RLocker returns the Locker of shared leases.
	RLocker() locks.Locker
}

// Fault is one backend fault the state machine can inject, and heal.
type Fault struct {
	// Name identifies the fault in logs ("partition node 0").
	Name string
	// Kind classifies it for Options.Claims.
	Kind FaultKind
	// Inject applies the fault.
	Inject func() error
	// Heal undoes it; nil for a fault that cannot be undone (a failover).
	Heal func() error

	_ struct{} // keyed literals only
}

// validate reports what is missing from b.
func (b *Backend) validate() error {
	switch {
	case b == nil:
		return fmt.Errorf("propertytest: factory returned a nil backend")
	case b.NewLocker == nil:
		return fmt.Errorf("propertytest: backend has no NewLocker")
	case b.Clock == nil:
		return fmt.Errorf("propertytest: backend has no Clock")
	case b.Advance == nil:
		return fmt.Errorf("propertytest: backend has no Advance")
	}
	for i, f := range b.Faults {
		if f.Inject == nil || f.Name == "" || f.Kind == "" {
			return fmt.Errorf("propertytest: fault %d (%q) needs a Name, a Kind and Inject", i, f.Name)
		}
	}
	return nil
}

// Crasher is implemented by a Locker that can be told its client crashed.
// The suite's crash cancels the client's operation in progress; a Locker
// that also implements Crasher is then asked to end everything its client
// started, as the death of its process would: its connections to the
// backend cut (so that a keep-alive, a session renewer or a heartbeat
// fails as it would after a real crash), its goroutines told to stop.
// The suite gives the client a new Locker afterwards, from
// Backend.NewLocker, as a restarted process would make. A Locker that is
// not a Crasher keeps its connections and goroutines across a crash, so a
// lock whose keep-alive runs on its own goroutine stays held by a
// "crashed" client until that keep-alive ends by itself.
//
// Crash is called once, on the suite's goroutine, with no operation of
// the client running; it must not block on the backend.
type Crasher interface {
	// Crash ends everything the client started.
	Crash()
}
