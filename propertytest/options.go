package propertytest

import (
	"fmt"
	"slices"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/linearize"
	"github.com/lockproof/lockproof/locks"
)

// FaultKind names a class of fault: it is chaos.Kind, the project's one
// fault vocabulary. A lock claims to survive some kinds (Options.Claims); a
// violation in a run that injected a kind it does not claim is reported as
// an expected violation, not a failure.
type FaultKind = chaos.Kind

// The fault kinds the suite injects, under the names propertytest has
// always given them (each is the chaos.Kind of the same name). FaultCrash
// and FaultPause are produced by the suite itself for every lock; the
// others come from the Backend's Faults.
const (
	// FaultCrash: a client stops without unlocking (its lease is left to
	// expire) and comes back as a fresh process.
	FaultCrash = chaos.KindCrash
	// FaultPause: a holder stalls between checking its lease and writing
	// (a GC pause), past its lease's deadline. Only fencing makes a lock
	// safe against it.
	FaultPause = chaos.KindPause
	// FaultPartition: the network between clients and a backend node loses
	// or holds messages.
	FaultPartition = chaos.KindPartition
	// FaultNodeDown: a backend node stops (and later restarts with its data).
	FaultNodeDown = chaos.KindNodeDown
	// FaultFailover: a primary is replaced by an asynchronously fed replica
	// that may have missed the last writes.
	FaultFailover = chaos.KindFailover
	// FaultClockJump: one backend node's clock jumps forward.
	FaultClockJump = chaos.KindClockJump
)

// Options configure Run and Check. The zero value is ready: every field has
// the default stated in its comment.
type Options struct {
	// Clients is the number of clients contending for the lock. Default 3.
	Clients int
	// TTL is the lease TTL given to every Locker (locks.WithTTL), on the
	// backend's manual clock. Default 1s.
	TTL time.Duration
	// Slack is what deadlock freedom allows beyond the TTL: after every
	// holder crashed, a new client must acquire the lock once TTL + Slack
	// has passed. Default TTL/4.
	Slack time.Duration
	// Claims are the fault kinds the lock claims to stay safe under.
	// Default: FaultCrash and FaultPause. A lock without fencing tokens
	// (Redlock) should claim only FaultCrash (and what its backend
	// survives, such as FaultNodeDown for a minority of Redlock nodes).
	Claims []FaultKind
	// Settle is the least wall time the suite gives a Lock before it
	// counts as blocked waiting; beyond it, the suite's scheduler waits
	// until the process is quiescent (see the package doc). Backends in
	// manual time need none; a backend that moves in real time (the
	// embedded etcd, a real server) needs its round trip. Default 0.
	Settle time.Duration
	// OpTimeout bounds each lock operation in wall time; an operation that
	// runs out has an unknown outcome. Default 2s.
	OpTimeout time.Duration
	// CheckSteps bounds each linearizability check in search steps
	// (linearize.Options.MaxSteps); a check that spends them is undecided
	// (logged, never a pass or a failure), on every machine alike, so that
	// a seed replays the same under any load. Default DefaultCheckSteps.
	CheckSteps int64
	// CheckTimeLimit bounds each linearizability check in wall time too, a
	// backstop for a check slower per step than most. Default 60s.
	CheckTimeLimit time.Duration
	// Name is the lock's name. Default "propertytest".
	Name string
	// ShrinkRuns bounds the minimization of a failing run by a number of
	// runs, counted from the run that reproduced the failure: past it, the
	// suite refuses rapid's further candidates at once (as invalid runs)
	// and rapid reports the smallest failing run found so far. A bound by
	// count, unlike rapid's wall-time bound (-rapid.shrinktime,
	// Standalone.ShrinkTime), which stays as a backstop, shrinks a seed to
	// the same run on an idle and on a loaded machine, so that a replay
	// prints the history the check printed. Default 200; negative means no
	// bound but the wall time's.
	ShrinkRuns int
	// OutDir is where the history of each violation is written, as the
	// JSON that `lockproof history` reads (Violation.File; the same data
	// is Violation.Evidence). Default in Run and Check: the
	// -propertytest.out flag, then the LOCKPROOF_PROPERTYTEST_OUT
	// environment variable, then t.TempDir() (removed after the test); in
	// RunStandalone: nowhere.
	OutDir string
	// Permits is how many leases the lock may grant at once: 1 for a
	// mutex, N for a semaphore of N permits (redislock.NewSemaphore, say).
	// With N > 1 the lock history is checked against
	// linearize.NewSemaphoreModel, and exclusivity means at most N clients
	// holding leases valid by their own deadlines; a probe TryLock is
	// refused only while all N are held. The shared register, whose
	// read-modify-writes N holders may interleave, is not used. Default 1.
	Permits int
	// ReadWrite makes the lock a read-write lock: every Locker the
	// Backend makes must be a ReadWriteLocker, and each acquisition of a
	// client draws its mode, shared (through RLocker) or exclusive. The
	// lock history is then checked against linearize.NewRWLeaseModel, and
	// exclusivity means that no client holds an exclusive lease valid by
	// its own deadline together with any other client holding a lease so
	// valid. Readers do not use the shared register (which checks a mutex);
	// the suite's probes and intruders take exclusive leases. It needs
	// Permits 1. Default false.
	ReadWrite bool
	// Reentrant checks re-entry by owner (locks.WithOwner): every client's
	// Locker is made with an owner id of its own, and a new Locker with a
	// new id when the client crashes (a restarted process has lost its
	// holds). A holder may then take nested holds on its acquisition
	// (Reenter, by Lock or TryLock) and unlock them, innermost first,
	// before its outer Unlock, as reentrant code does. A nested hold must
	// come back at once with the acquisition's fencing token: another
	// token is a second acquisition while the first is held
	// (exclusivity), a refusal or a wait is the owner locked out by its
	// own acquisition (deadlock freedom). A nested hold's Unlock must leave
	// the acquisition held: the other clients' grants are checked against
	// it as before (exclusivity). Re-entry is the client's own business,
	// so nested holds and their Unlocks are not in the lock history.
	// Default false.
	Reentrant bool

	_ struct{} // keyed literals only
}

// DefaultShrinkRuns is Options.ShrinkRuns's default: enough for rapid to
// shrink the suite's failures to a few operations (a run on an in-process
// backend takes milliseconds), few enough to bound the time it takes.
const DefaultShrinkRuns = 200

// withDefaults fills in the defaults and validates o.
func (o Options) withDefaults() (Options, error) {
	if o.Clients == 0 {
		o.Clients = 3
	}
	if o.TTL == 0 {
		o.TTL = time.Second
	}
	if o.Slack == 0 {
		o.Slack = o.TTL / 4
	}
	if o.Claims == nil {
		o.Claims = []FaultKind{FaultCrash, FaultPause}
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 2 * time.Second
	}
	if o.CheckSteps == 0 {
		o.CheckSteps = DefaultCheckSteps
	}
	if o.CheckTimeLimit == 0 {
		o.CheckTimeLimit = 60 * time.Second
	}
	if o.Name == "" {
		o.Name = "propertytest"
	}
	if o.ShrinkRuns == 0 {
		o.ShrinkRuns = DefaultShrinkRuns
	}
	if o.Permits == 0 {
		o.Permits = 1
	}
	switch {
	case o.Clients < 2:
		return o, fmt.Errorf("propertytest: %d clients: at least 2 are needed to contend", o.Clients)
	case o.Permits < 1 || o.Permits >= o.Clients:
		return o, fmt.Errorf("propertytest: %d permits for %d clients: at least 1, and fewer than the clients so that they contend", o.Permits, o.Clients)
	case o.ReadWrite && o.Permits > 1:
		return o, fmt.Errorf("propertytest: a read-write lock (ReadWrite) of %d permits: the suite knows read-write locks of one writer only", o.Permits)
	case o.TTL < locks.MinTTL:
		return o, fmt.Errorf("propertytest: TTL %v is below locks.MinTTL %v", o.TTL, locks.MinTTL)
	case o.Slack < 0 || o.Settle < 0 || o.OpTimeout < 0 || o.CheckTimeLimit < 0 || o.CheckSteps < 0:
		return o, fmt.Errorf("propertytest: negative duration or step limit in options")
	}
	return o, nil
}

// claims reports whether the lock claims to survive k.
func (o Options) claims(k FaultKind) bool { return slices.Contains(o.Claims, k) }

// DefaultCheckSteps is Options.CheckSteps when it is zero: for a lease
// history, several seconds of search on a laptop, and well over a hundred
// times what the suite's histories usually take.
const DefaultCheckSteps = 5_000_000

// checkOptions are the linearize options of each history check.
func (o Options) checkOptions() linearize.Options {
	return linearize.Options{TimeLimit: o.CheckTimeLimit, MaxSteps: o.CheckSteps, Workers: 1}
}
