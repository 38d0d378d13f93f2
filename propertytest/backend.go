package propertytest

import (
	"fmt"
	"io"
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

// CloseAtCleanup registers the closing of c (a fake from fakes.Start*, a
// proxy, a client) with env, and logs an error it returns: how a Factory
// hands what it started to the run, which closes it when the run ends.
func CloseAtCleanup(env Env, what string, c io.Closer) {
	env.Cleanup(func() {
		if err := c.Close(); err != nil {
			env.Logf("propertytest: closing %s: %v", what, err)
		}
	})
}

// Backend is one lock backend for one run, with the controls the suite
// drives; NewLocker, Clock and Advance are required. A Factory of one's
// own keeps these rules:
//
//   - Fresh and released: each call starts a backend that holds nothing of
//     an earlier run, and hands all it starts (servers, clients, proxies)
//     to the run, with CloseAtCleanup or env.Cleanup, or releases it in
//     Close. A failure to start is an error returned, not a panic.
//   - Gated: every request a client sends with an operation's context
//     calls locks.GateRequest with that context (the fakes' clients do,
//     by hooks; a client of one's own must too). The suite orders the
//     clients' requests at those gates: one that passes none cannot be
//     stalled or overtaken there, and the run no longer replays exactly
//     from its seed.
//   - Manual time: the lockers and the backend follow Clock, and Advance
//     moves both; with a ManualClock (fakes.Clock), leases run out, edges
//     are probed and timers fire in the same order in every replay,
//     without sleeping. A backend in real time (locks.SystemClock,
//     Advance sleeping) is judged too, slowly and with no exact replay.
//   - The suite's options last: NewLocker passes opts after the
//     backend's own (see the field).
//   - Crashes: a Locker that can end all its client started implements
//     Crasher; one that cannot keeps its connections across a crash.
//   - Honest controls: InProcess only when no connection is a socket;
//     Nodes, StopNode and StartNode only for a quorum of independent
//     nodes; a Fault's Kind says what it does, for Options.Claims.
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

// ManualClock is a clock that moves only when told to and lets the suite
// order the timer callbacks one move passes; fakes.Clock is one. When
// Backend.Clock is a ManualClock, the suite starts the callbacks due in one
// Advance one at a time, in deadline order, each after the process is
// quiescent, so that two leases' watchdogs due together act in the same
// order in every replay of a seed.
type ManualClock interface {
	locks.Clock
	// Advance moves the clock forward by d, firing the timers it passes.
	Advance(d time.Duration)
	// SetDispatch replaces how the AfterFunc callbacks one Advance passes
	// are started: run gets them in deadline order and must see that each
	// runs. nil restores the clock's default.
	SetDispatch(run func(fs []func()))
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

// RWViews returns the ReadWriteLocker of a read-write lock's two views:
// read takes shared leases, write the exclusive one.
func RWViews(read, write locks.Locker) ReadWriteLocker {
	return rwViews{Locker: write, read: read}
}

// rwViews is RWViews' ReadWriteLocker.
type rwViews struct {
	locks.Locker
	read locks.Locker
}

func (v rwViews) RLocker() locks.Locker { return v.read }

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
