// Package propertytest is lockproof's conformance suite: one call tells a
// lock author whether a lock keeps exclusivity, symmetry, deadlock freedom,
// availability and progress under the faults it claims to survive, and if
// not, gives the seed and the smallest history that shows it.
//
//	func TestMyLock(t *testing.T) {
//		propertytest.Run(t, myFactory, propertytest.Options{})
//	}
//
// The index:
//
//   - Run(t, factory, Options) fails t on a violated claim; Check returns a
//     Report instead (to assert that a broken lock is caught).
//   - Factory, Backend, Fault: what a lock author supplies (lockers for N
//     clients, the manual clock and Advance, node controls and faults);
//     Backend's documentation states the rules a Factory follows. A Factory
//     gets an Env (Cleanup, Logf; *testing.T is one), starts its fakes with
//     fakes.Start* and hands them to the run with CloseAtCleanup.
//   - Evidence: a violation's history and checker result, as data and as
//     the JSON `lockproof history` reads.
//   - Options: clients, TTL, slack, claims (Claims, FaultKind), budgets;
//     every field states its default.
//   - Property, Violation, Report: what was found.
//   - RunStandalone: the suite outside go test (lockproof check uses it).
//   - Sub-packages: backends (lockproof's locks on fakes and real servers),
//     suitemain (a TestMain: short rapid defaults, LOCKPROOF_DEEP=1, the
//     leak check), adapter (for locks written elsewhere), mutants (broken
//     locks, each caught with its property named), thirdparty.
//
// # One run
//
// A run builds a fresh backend; rapid draws actions (-rapid.steps on
// average): Lock, TryLock, Unlock and Renew (each may stall at a drawn
// gate); Resume (a stalled call goes on); Overtake (a stalled client's
// lease runs out, to just past the backend's expiry or by TTL + Slack,
// another client takes the lock, then the stalled call goes on: a late
// renewal, release or reply); StallOvertake (an Unlock, Renew or TryLock
// stopped at its first to fourth gate and overtaken at once, the
// check-then-act over two requests; a Renew is at times sent with half its
// lease left, as a watchdog does, since one sent at its grant's instant
// extends nothing); SlowGrant (a reply late by part of the TTL, probed at
// the holder's deadline); Edge (time just before or after a holder's
// deadline, by ± TTL/200 and the like, where another client's TryLock and
// the holder's fenced write probe); a foreign Unlock or Renew (with an
// expired lease of its own while another client holds the lock);
// FinishWork and BeginWork; Crash (stop without unlocking, cutting a call
// where it stands); CrashInTryLock (death at locks.PointAcquired, after
// the grant and before TryLock returned, so work a lock still had to do
// there, such as setting the key's TTL, never happens); Advance (TTL/10,
// TTL/3 or TTL+Slack of the manual clock); Fault (inject or heal one of
// the Backend's faults). Every grant starts the holder's read-modify-write
// of a shared register (read now, write value+1 at a later FinishWork with
// the lease's fencing token, unguarded without one): the time between is
// a GC pause.
//
// Every operation is recorded with call and return times on the manual
// clock. An outcome the client cannot know (a timeout, a lost reply, a
// cancelled wait, Unlock of an expired lease, an Unlock held between its
// requests while time moved that reports not held) is recorded as
// unknown. At the end the run heals faults, crashes every client and runs
// the checks below.
//
// # The scheduler
//
// Every operation runs on its own goroutine with a context carrying a
// locks.Gate. The backends' clients call the gate before each request
// (fakes installs the hooks for go-redis, Consul's HTTP transport,
// database/sql and etcd's gRPC; MemLock calls it itself), and the suite's
// Observer calls it at every locks.Point. The gate parks the operation
// until the driver (the goroutine running rapid's actions) lets it go, so
// the seed decides which request goes next. Whether an operation reached
// its next gate, finished or is blocked is decided by quiescence, not wall
// time: two snapshots of every goroutine, a moment apart, identical and
// none runnable. A seed replays the same history byte for byte on every
// backend whose clients reach it in memory (Backend.InProcess): MemLock,
// miniredis, miniconsul, go-mysql-server (see TestSeedReplaysExactly;
// minizk is not exact). There a request times out only when the process
// is quiescent with it unanswered (locks.RequestClocker). On a backend in
// real time or behind TCP proxies a replay is best effort; a run whose
// driver gave up waiting for quiescence says so in its log.
//
// No wait is unbounded. A run that stops moving ends within StuckLimit
// (5 s) of wall time, plus twice TTL + Slack on a backend in real time,
// with an error naming the cause and fix: a lock polling in wall time
// while the run's clock stands still (one operation past its gate 100
// times in a second), a goroutine that never lets the process become
// quiescent, an operation that ignores its context's end. Run fails the
// test with it; Check and RunStandalone put it in Report.Output, and
// RunStandalone returns ErrNoVerdict.
//
// # Properties
//
//   - Exclusivity: the lock history must be linearizable for
//     linearize.NewLeaseModel(TTL, locks.Drift(TTL)) (NewSemaphoreModel
//     with Permits > 1, NewRWLeaseModel with ReadWrite), carrying each
//     grant's Deadline: a second grant is legal once the previous lease
//     may have ended, at its deadline or TTL minus the drift allowance
//     after its call, whichever is first, and no sooner than TTL minus the
//     drift allowance after the call of its last successful renewal.
//     Fencing tokens must grow. An admitted write of v+1 when the register
//     is no longer v is a lost update; the register history is also
//     checked by linearize (NewFencedRegisterModel, or NewRegisterModel
//     without fencing), which guards the recording itself.
//   - Symmetry: after a foreign Unlock or Renew, while another client's
//     lease is within its local deadline, a probe TryLock must be refused.
//     A probe just before the foreign call must be refused too; if granted,
//     it is reported as exclusivity. Skipped while a fault is active or
//     when one was injected or healed since a holder's acquisition was
//     called (a failover loses the lock by itself). A foreign Unlock or
//     Renew that reports success is also illegal in the lease model.
//   - Deadlock freedom: a lock whose holders are all gone is obtainable
//     again by TTL + Slack + Backend.Recovery (the bound below; Recovery is
//     what a replicated backend takes to elect a leader and serve again,
//     zero for one node). After every client crashed and the bound, a new
//     client's TryLock must be granted; a refusal is retried once, the
//     bound later (twice after faults: a held request may land late); a
//     probe with no answer is retried up to five times. An Ongoing fault is
//     struck again before each probe. A lock freed by an Unlock and still
//     refused the bound plus Slack later breaks it too.
//   - Progress: a lock works when nothing is wrong. With no fault and
//     nothing in doubt (crash, unknown outcome, foreign call) within TTL +
//     Slack, a holder's Unlock or Renew called within its deadline and run
//     straight through must not fail with an error of its own (ErrNotHeld
//     is the lease model's to judge; checked on backends in manual time);
//     a lock freed by an Unlock, or refused to a TryLock while free, must
//     grant a probe within Slack. One refusal of a free lock is tolerated
//     and counted (Report.SpuriousRefusals; up to two a run), since a lock
//     may lose a race inside its own attempt. It is apart from deadlock
//     freedom: a lock whose every Unlock fails still frees by its TTL.
//
// Why no correct lock breaks exclusivity here: its holder acts only until
// its lease's Deadline, and its backend lets no one in before that (or,
// with no deadline reported, before TTL minus the drift allowance after
// the holder's call, which no backend expiring keys no earlier than TTL
// cuts short). The model ends each lease at the earlier of the two, so any
// grant after the holder stopped acting is legal, whenever the lock
// reckons its lease from. Unknown outcomes take effect or not, and the
// model tries both. What stays illegal is a grant inside a lease still
// valid by its own deadline, a token that does not grow, a successful
// Unlock or Renew by a non-holder, or a lost update: each is two clients
// acting at once. A lock reporting a deadline later than its backend
// honours is caught by "two holders at once" below.
//
// Three checks belong to the properties above, each one seen from another
// side:
//
//   - Two holders at once (exclusivity): no two clients may hold leases
//     both valid by their own Deadline and Done; a grant inside another
//     such lease is reported at once. A correct holder's deadline ends no
//     later than the backend's expiry, so this catches a deadline reckoned
//     from the reply, a drift allowance added instead of taken away, or a
//     late renewal that reported success, whatever the lease model accepts.
//   - Loss signalled (exclusivity): after a Renew the backend refused, Done
//     must be closed and Err set at once; likewise once past Deadline by
//     more than Slack without a renewal. Otherwise a holder waiting on Done
//     acts as holder after the lock went to someone else.
//   - Freed means free (progress, or deadlock freedom): right after a
//     successful Unlock, with nobody else holding or waiting and nothing in
//     doubt, a TryLock must be granted within Slack. A lock that leaves a
//     queue entry or a live key behind breaks progress if granted only after
//     its TTL, deadlock freedom if never.
//   - Availability: for a Backend with at least 3 Nodes, StopNode and
//     StartNode, with a minority stopped, TryLock, Renew and Unlock must
//     succeed. A refused TryLock is retried twice, TTL + Slack apart (an
//     earlier timed-out request may have left the key on a node).
//
// # Fault model and verdicts
//
// Options.Claims lists the fault kinds the lock claims to survive (default
// FaultCrash and FaultPause). A violation in a run that injected an
// unclaimed fault, or a lost update from a holder writing after its
// deadline when FaultPause is not claimed, is an "expected violation":
// logged, counted in Report.Expected, never a failure. Any other is
// "VIOLATED": Run fails the test with the property, the detail, the
// minimal history and the path of the history file naming its model
// (linearize.ReadFile and `lockproof history` read, recheck and draw it;
// -propertytest.out, LOCKPROOF_PROPERTYTEST_OUT, else the test's temporary
// directory); rapid shrinks the run and prints -rapid.seed to replay it.
// Violation.Evidence holds the same as data.
//
// # Limits
//
// Replays are exact on backends in manual time whose locks keep no
// wall-time timers. Locks or clients with such timers (Redlock's per-node
// timeout, redsync's back-off), real-time backends and parallel tests can
// move on their own: their replays are best effort. Requests a lock sends
// on a context of its own (a watchdog) are not gated. Leases without
// fencing tokens (Redlock) get tokens in the order the backend granted
// them (at locks.PointAcquired, else at return), in steps of 65536 leaving
// room for unknown acquires the model may place between two grants. rapid
// shrinks a failing run within -rapid.shrinktime (suitemain.Main sets 2s;
// rapid's default is 30s); each history check shrinks within CheckSteps.
package propertytest
