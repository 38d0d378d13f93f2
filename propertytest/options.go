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

// The fault kinds the suite injects, each the chaos.Kind of the same name.
// The suite makes FaultCrash and FaultPause for every lock; the others
// come from the Backend's Faults.
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
	// FaultNodeDown: a backend node stops abruptly, as killed, and later
	// restarts with its data.
	FaultNodeDown = chaos.KindNodeDown
	// FaultNodeKill: a backend node is killed and restarts without what it
	// had not made durable.
	FaultNodeKill = chaos.KindNodeKill
	// FaultNodePause: a backend node stops answering, keeping its state,
	// then resumes.
	FaultNodePause = chaos.KindNodePause
	// FaultFailover: a primary is replaced by an asynchronously fed replica
	// that may have missed the last writes.
	FaultFailover = chaos.KindFailover
	// FaultClockJump: one backend node's clock jumps forward.
	FaultClockJump = chaos.KindClockJump
	// FaultClockSkew: one backend node's clock runs ahead of or behind the
	// others' for a while.
	FaultClockSkew = chaos.KindClockSkew
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
	// (+ Backend.Recovery) has passed. Default TTL/4.
	Slack time.Duration
	// Claims are the fault kinds the lock claims to stay safe under.
	// Default: FaultCrash and FaultPause. A lock without fencing tokens
	// (Redlock) should claim only FaultCrash (and what its backend
	// survives, such as FaultNodeDown for a minority of Redlock nodes).
	Claims []FaultKind
	// Settle is the least wall time a Lock gets before it counts as blocked
	// waiting (then the scheduler waits for quiescence). Manual-time backends
	// need none; a real-time one needs its round trip. Default 0.
	Settle time.Duration
	// OpTimeout bounds each lock operation in wall time; an operation that
	// runs out has an unknown outcome. Default 2s.
	OpTimeout time.Duration
	// CheckSteps bounds each linearizability check in search steps
	// (linearize.Options.MaxSteps); a check that spends them is undecided
	// (logged, never pass or fail), alike under any load. Default
	// DefaultCheckSteps.
	CheckSteps int64
	// CheckTimeLimit bounds each linearizability check in wall time too, a
	// backstop for a check slower per step than most. Default 60s.
	CheckTimeLimit time.Duration
	// Name is the lock's name. Default "propertytest".
	Name string
	// ShrinkRuns bounds shrinking a failing run, counted in runs from the
	// one that reproduced it; past it rapid's candidates are refused, so a
	// seed shrinks alike on any load (-rapid.shrinktime stays a backstop).
	// Default 200; negative means only the wall-time bound.
	ShrinkRuns int
	// OutDir is where each violation's history is written as JSON
	// (Violation.File). Default in Run and Check: -propertytest.out, then
	// LOCKPROOF_PROPERTYTEST_OUT, then t.TempDir(); in RunStandalone:
	// nowhere.
	OutDir string
	// Permits is how many leases may be held at once: N > 1 for a semaphore
	// checks linearize.NewSemaphoreModel, at most N valid holders, probes
	// refused only while all N are held, and no shared register. Default 1.
	Permits int
	// ReadWrite makes every Locker a ReadWriteLocker, each acquisition
	// drawing shared or exclusive; checked against NewRWLeaseModel (no valid
	// exclusive lease beside any other valid lease). Probes take exclusive
	// leases; readers skip the register. Needs Permits 1. Default false.
	ReadWrite bool
	// Reentrant gives each client an owner id (locks.WithOwner, new after a
	// crash) and has holders take and unlock nested holds: each must come
	// back at once with the same token (else exclusivity or deadlock
	// freedom) and leave the acquisition held. Default false.
	Reentrant bool

	_ struct{} // keyed literals only
}

// DefaultShrinkRuns is Options.ShrinkRuns's default.
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

// DefaultCheckSteps is Options.CheckSteps when it is zero, well over a
// hundred times what the suite's histories usually take.
const DefaultCheckSteps = 5_000_000

// checkOptions are the linearize options of each history check.
func (o Options) checkOptions() linearize.Options {
	return linearize.Options{TimeLimit: o.CheckTimeLimit, MaxSteps: o.CheckSteps, Workers: 1}
}
