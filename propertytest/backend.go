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

// Env is what a Factory gets from the run it builds a backend for; its
// clean-ups run at the end of the run, not of the test, so finished runs'
// servers do not pile up. *testing.T satisfies it.
type Env interface {
	// Cleanup registers f to run at the end of the run, last registered
	// first.
	Cleanup(f func())
	// Logf adds a line to the run's log (the test's log in Run and Check,
	// Standalone.Log and Report.Output in RunStandalone).
	Logf(format string, args ...any)
}

var _ Env = (*testing.T)(nil)

// CloseAtCleanup registers the closing of c (a fake, a proxy, a client)
// with env, logging an error it returns.
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
//     calls locks.GateRequest with it (the fakes' clients do, by hooks);
//     a request passing no gate cannot be stalled or replayed exactly.
//   - Manual time: the lockers and the backend follow Clock, and Advance
//     moves both; with a ManualClock (fakes.Clock) a seed replays without
//     sleeping. A real-time backend is judged too, slowly, inexactly.
//   - The suite's options last: NewLocker passes opts after the
//     backend's own (see the field).
//   - Crashes: a Locker that can end all its client started implements
//     Crasher; one that cannot keeps its connections across a crash.
//   - Honest controls: InProcess only when no connection is a socket;
//     Nodes, StopNode and StartNode only for a quorum of independent
//     nodes; a Fault's Kind says what it does, for Options.Claims.
type Backend struct {
	// NewLocker returns the Locker of one client, on its own connection,
	// for the lock called name. It passes opts (TTL, watchdog off, the
	// suite's Observer) after the backend's own, so the suite's win;
	// observers add up (locks.WithObserver).
	NewLocker func(name string, opts ...locks.Option) (locks.Locker, error)
	// Clock is the manual clock the lockers and the backend follow; the
	// suite stamps every operation with it.
	Clock locks.Clock
	// Advance moves the backend's time and Clock forward by d.
	Advance func(d time.Duration)
	// Nodes is the number of independent nodes the lock takes a quorum
	// of (Redlock's); 1 when zero. Availability is checked at 3 or more
	// with StopNode set. A replicated backend is one node here.
	Nodes int
	// StopNode and StartNode stop node i and start it again with its data,
	// for the availability check. Optional.
	StopNode, StartNode func(i int)
	// Faults are the backend faults the state machine may inject.
	Faults []Fault
	// Close, if set, releases the backend at the end of the run.
	Close func()
	// Recovery is the longest the backend takes to serve again, and to let
	// a dead holder's lease run out, after a node fault: an election, a
	// Sentinel failover, a session check. Every liveness bound adds it to
	// TTL + Slack. Zero for a backend of independent nodes, or of one.
	Recovery time.Duration
	// InProcess reports that every connection of the run is in memory
	// (no socket), so the scheduler need not wait wall time for the
	// kernel. Leave it false if any client uses a socket.
	InProcess bool

	_ struct{} // keyed literals only
}

// ManualClock is a clock that moves only when told to and lets the suite
// start the timer callbacks of one Advance one at a time, in deadline
// order, after quiescence; fakes.Clock is one.
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
	// Ongoing marks a node fault the nemesis goes on with after every
	// client crashed: injected before each deadlock-freedom probe, healed
	// after the probes, so each probe meets a backend just recovering
	// (Backend.Recovery). Needs Heal.
	Ongoing bool
	// AtAcquire marks a fault that breaks a lock only around an
	// acquisition: besides the Fault action, before each Lock and TryLock
	// the suite draws whether to inject it there and heal it once the call
	// is done, or blocked. After each of its heals, while the lock is held,
	// the suite contends for it at once (a probe TryLock, in the history):
	// a grant the fault lost shows as two holders before the holder lets
	// go. Needs Heal.
	AtAcquire bool
	// StrikeWhen narrows AtAcquire to the acquisitions a fault can break:
	// StrikeFree to those that start while no client believes it holds the
	// lock (a grant the fault loses, as in a failover), StrikeHeld to those
	// that start while the lock is full (a second grant the fault lets
	// through, as a node restarted empty or a clock run ahead does). The
	// zero value, StrikeAny, strikes around any.
	StrikeWhen Strike

	_ struct{} // keyed literals only
}

// Strike says around which acquisitions a fault marked AtAcquire may strike
// (Fault.StrikeWhen).
type Strike int

const (
	// StrikeAny strikes around any acquisition.
	StrikeAny Strike = iota
	// StrikeFree strikes around acquisitions that start with the lock free.
	StrikeFree
	// StrikeHeld strikes around acquisitions that start with the lock full.
	StrikeHeld
)

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
	case b.Recovery < 0:
		return fmt.Errorf("propertytest: backend has a negative Recovery %v", b.Recovery)
	}
	for i, f := range b.Faults {
		if f.Inject == nil || f.Name == "" || f.Kind == "" {
			return fmt.Errorf("propertytest: fault %d (%q) needs a Name, a Kind and Inject", i, f.Name)
		}
		if f.Ongoing && f.Heal == nil {
			return fmt.Errorf("propertytest: fault %d (%q) is Ongoing without a Heal: the probes need it healed", i, f.Name)
		}
		if f.StrikeWhen != StrikeAny && !f.AtAcquire {
			return fmt.Errorf("propertytest: fault %d (%q) has a StrikeWhen without AtAcquire", i, f.Name)
		}
		if f.StrikeWhen < StrikeAny || f.StrikeWhen > StrikeHeld {
			return fmt.Errorf("propertytest: fault %d (%q) has an unknown StrikeWhen %d", i, f.Name, f.StrikeWhen)
		}
		if f.AtAcquire && f.Heal == nil {
			return fmt.Errorf("propertytest: fault %d (%q) is AtAcquire without a Heal: the acquisition's end needs it healed", i, f.Name)
		}
	}
	return nil
}

// Crasher is implemented by a Locker that can be told its client crashed.
// After cancelling the client's operation, the suite calls Crash to end
// all the client started, as a process death would: connections cut (so
// keep-alives fail), goroutines stopped. The client then gets a new
// Locker. A non-Crasher keeps its connections and goroutines, so its
// keep-alive may hold the lock for a "crashed" client. Crash is called
// once, on the suite's goroutine, with no operation running; it must not
// block on the backend.
type Crasher interface {
	// Crash ends everything the client started.
	Crash()
}
