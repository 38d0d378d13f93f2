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
//   - Run(t, factory, Options): rapid state machines over the lock; fails t
//     on a violated claim. Check: the same, returning a Report instead of
//     failing (to assert that a broken lock is caught).
//   - Factory, Backend, Fault: what a lock author supplies: lockers of one
//     lock on one backend for N clients, the backend's manual clock and
//     Advance, its node controls and faults; Backend's documentation
//     states the rules a Factory follows. A Factory gets an Env (the run's
//     Cleanup and Logf; *testing.T is one) and starts its fakes with
//     fakes.Start*, handing them to the run with CloseAtCleanup.
//   - Evidence: a violation's history and the checker's result, as data
//     and as the JSON lockproof history reads.
//   - Options: clients, TTL, slack, the claimed fault model (Claims,
//     FaultKind), budgets. Every field has a stated default.
//   - Property, Violation, Report: what was found.
//   - RunStandalone: the suite outside go test (lockproof check uses it).
//   - Sub-packages: backends, the factories of lockproof's own locks on
//     their fakes and on real servers; suitemain, the TestMain of a
//     package of property tests (short rapid defaults, LOCKPROOF_DEEP=1,
//     the leak check); adapter, the kit for locks written elsewhere.
//   - Deliberately broken locks, each caught with its property named, are
//     in propertytest/mutants; third-party locks run the suite in
//     propertytest/thirdparty.
//
// # One run
//
// A run builds a fresh backend, then rapid draws actions (-rapid.steps of
// them on average): Lock, TryLock, Unlock and Renew (each may stall at a
// drawn gate, see below), Resume (a stalled call goes on), Overtake (a
// stalled client's lease runs out, to just past the backend's expiry or by
// TTL + Slack, another client takes the lock, then the stalled call goes
// on: a renewal or release that reaches the backend late, a reply that
// comes back late), StallOvertake (an Unlock, Renew or TryLock stopped at
// its first, second, third or fourth gate and overtaken at once: the
// check-then-act over two requests; a Renew is at times sent with half its
// lease left, as a watchdog sends it, for a renewal sent at its grant's
// instant would extend nothing even where it lands on another client's
// key), SlowGrant (an acquisition whose
// reply is late by a part of the TTL, then probed at the holder's
// deadline), Edge (time moves to just before or after a holder's own
// deadline, by ± TTL/200 and the like, and another client's TryLock and the
// holder's fenced write probe there), a foreign Unlock or Renew (a client
// using a lease of its own that ran out, while another client holds the
// lock), FinishWork and BeginWork, Crash (stop without unlocking, a call
// in progress cut where it stands), CrashInTryLock (a client dies inside
// TryLock at locks.PointAcquired, after the backend granted and before
// TryLock returned: the suite's Observer ends that goroutine, so a lock
// that still had work to do there, such as setting the key's TTL, never
// does it), Advance (TTL/10, TTL/3 or TTL+Slack of the manual clock) and
// Fault (inject or heal one of the Backend's faults). Every grant starts
// the holder's read-modify-write of a shared register (read now, write
// value+1 at a later FinishWork, with the lease's fencing token; a lease
// without a token writes unguarded): time passing between the two is a GC
// pause.
//
// Every lock operation is recorded with its call and return time on the
// manual clock; an outcome the client cannot know (a timeout, a lost
// reply, a cancelled wait, Unlock of a lease that ran out, an Unlock held
// up between its requests while time moved that reports the lease not
// held: a release on one node may have freed the lock before the others
// found the key expired) is recorded as unknown. At the end the run heals
// its faults, crashes every client and runs the checks below.
//
// # The scheduler
//
// Every operation runs on a goroutine of its own, with a context that
// carries a locks.Gate. The backends' clients call the gate before each
// request (fakes installs the hooks: go-redis, Consul's HTTP transport,
// database/sql, etcd's gRPC; MemLock calls it itself), and the suite's
// Observer calls it at every locks.Point the lock reports. The gate parks
// the operation until the driver, the goroutine running rapid's actions,
// lets it go. So the seed decides which request goes next, and a client
// can be stalled between two of its requests while others act and time
// passes. Whether an operation has reached its next gate, finished or is
// blocked waiting (a Lock waiting for a notification) is decided by
// quiescence, not by wall time: after each step the driver waits until
// two snapshots of every goroutine, a moment apart, are identical and show
// none runnable. A seed then replays the same interleaving and the same
// history, byte for byte, on every backend whose clients reach it in
// memory (Backend.InProcess): MemLock, miniredis (Redlock's nodes too),
// miniconsul and go-mysql-server (TestSeedReplaysExactly, whose
// documentation tells what it took and where the limits are: minizk is
// not exact, its clients' reconnection after a session expiry racing the
// expired holder's clean-up). There a request's timeout runs out only when
// the process is quiescent with the request unanswered, not after wall
// time (locks.RequestClocker). On a backend in real time (the
// embedded etcd, a real server) or behind TCP proxies (the network-fault
// cells) a replay is best effort. A run in which the driver gave up
// waiting for quiescence (a loaded machine) says so in its log.
//
// No wait of the scheduler is unbounded. A run that stops moving ends,
// within StuckLimit (5 s) of wall time, plus twice TTL + Slack on a
// backend in real time, with an error that names the cause and the fix:
// a lock that polls in wall time while the run's clock stands still
// (told as soon as one operation passed its gate 100 times over a second
// of wall time), a goroutine that never lets the process become
// quiescent, an operation that does not return when its context ends.
// Run fails the test with it; Check and RunStandalone put it in the
// Report's Output, and RunStandalone returns ErrNoVerdict.
//
// # Properties
//
//   - Exclusivity: the lock history must be linearizable for
//     linearize.NewLeaseModel(TTL, locks.Drift(TTL)) (NewSemaphoreModel
//     with Options.Permits > 1, NewRWLeaseModel with ReadWrite), the
//     history carrying the Deadline each grant reported: a second grant
//     is legal once the previous lease may have ended, at the deadline
//     its holder was given or TTL minus the drift allowance after the
//     call that granted it, whichever comes first, and no sooner than TTL
//     minus the drift allowance after the call of its last successful
//     renewal (a backend that said yes to a renewal extended the lease
//     then); fencing tokens must grow. The register must lose no update:
//     an admitted write of v+1 when the value is no longer v is a lost
//     update. The register history is also checked with linearize
//     (NewFencedRegisterModel, or NewRegisterModel without fencing), which
//     guards the recording itself.
//   - Symmetry: after a foreign Unlock or Renew, while another client's
//     lease is within its local deadline (which ends before the backend's
//     TTL), a probe TryLock must be refused. A probe just before the
//     foreign call must be refused too; if it is granted, the violation is
//     reported as exclusivity, not blamed on the foreign call. Skipped
//     while a backend fault is active or when one was injected or healed
//     since a holder's acquisition was called (a failover loses the lock
//     by itself); a fault over before the acquisition cannot take it. A
//     foreign Unlock or Renew that reports success is also illegal in the
//     lease model.
//   - Deadlock freedom: a lock whose holders are all gone is obtainable
//     again by TTL + Slack. Once every client crashed, after TTL + Slack a
//     new client's TryLock must be granted; a refusal is retried once,
//     TTL + Slack later (twice after backend faults: a held request may
//     land late); a probe that gets no answer at all is retried up to five
//     times, since it is no evidence either way. A lock freed by an Unlock
//     and still refused TTL + 2 × Slack later breaks it too.
//   - Progress: a lock works when nothing is wrong. In a run with no
//     backend fault and nothing in doubt (a crash, an unknown outcome, a
//     foreign call) within TTL + Slack, a holder's Unlock or Renew called
//     within its deadline and run straight through must not fail with an
//     error of its own (a refusal, ErrNotHeld, is the lease model's to
//     judge; checked on backends in manual time, where no request times
//     out of itself); a lock freed by an Unlock, or refused to a TryLock while
//     free, must grant a probe within Slack, not only once it expired. A
//     single refusal of a free lock is tolerated and counted
//     (Report.SpuriousRefusals; up to two a run in the lock history), since
//     a lock may lose a race inside its own attempt. It is a property of
//     its own rather than part of deadlock freedom: a lock whose every
//     Unlock fails still comes free by its TTL, and is no deadlock.
//
// Why no correct lock breaks exclusivity here: a correct lock's holder
// acts only until the Deadline its lease reports, and its backend lets no
// one else in before that deadline (or, for a lock that reports none,
// before TTL minus the drift allowance after the holder's call, which no
// backend that expires a key no earlier than its TTL cuts short). The
// model lets each lease end at the earlier of the two, so any grant the
// backend may make after the holder stopped acting is legal, whenever the
// lock reckons its lease from (the call, a session made at the call, a
// quorum's first yes). Unknown outcomes can only take effect or not, and
// the model tries both. What stays illegal is a grant inside a lease that
// was still valid by its own deadline, a token that does not grow, an
// Unlock or Renew that succeeded for an owner that did not hold the lock,
// or a lost update: each is two clients acting at once. A lock that
// reports a deadline later than its backend honours is caught by the
// named check below (two holders at once), which judges each holder by its
// own deadline.
//
// Three checks belong to the properties above rather than standing as
// properties of their own, because each is one of them seen from another
// side:
//
//   - Two holders at once (exclusivity): at no step may two clients hold
//     leases that are both valid by their own Deadline and Done, and a
//     grant while another client's lease is so valid is reported at once.
//     A correct lock cannot get there: a holder's deadline ends no later
//     than the backend's expiry. A lock whose lease ends on the backend
//     earlier than the holder believes (a deadline reckoned from the
//     reply, a drift allowance added instead of taken away), or a renewal
//     that reached the backend late and reported success, is caught here
//     whatever the lease model accepts: two clients act as holders.
//
//   - Loss signalled (exclusivity): a lease must say it is lost. After a
//     Renew the backend refused, Done must be closed and Err set at once;
//     once past its Deadline by more than Slack, without a renewal, the
//     same. A holder that waits on Done (a watchdog that logs and swallows
//     its failures) would otherwise act as holder after the lock went to
//     someone else.
//
//   - Freed means free (progress, or deadlock freedom): right after a
//     successful Unlock, with nobody else holding or waiting and nothing in
//     doubt (no operation of unknown outcome, crash or foreign call within
//     TTL + Slack, no backend fault), a TryLock must be granted, at once or
//     within Slack. A lock that leaves a queue entry behind after a refused
//     TryLock, or a key kept alive, is refused here: granted only after
//     its TTL, it broke progress; never, deadlock freedom.
//
//   - Availability: for a Backend with at least 3 Nodes, StopNode and
//     StartNode, with a minority of nodes stopped, TryLock, Renew and
//     Unlock must succeed. A refused TryLock is retried twice, TTL + Slack
//     apart: a timed-out request of an earlier client may still have left
//     the key on a node for a TTL.
//
// # Fault model and verdicts
//
// Options.Claims lists the fault kinds the lock claims to survive (default
// FaultCrash and FaultPause). A violation in a run that injected a fault
// the lock does not claim, or a lost update caused by a holder writing after
// its lease's deadline when FaultPause is not claimed, is an "expected
// violation": logged and counted in Report.Expected, never a failure. Any
// other violation is "VIOLATED": Run fails the test with the property, the
// detail, the minimal history (the counterexample linearize shrank, or the
// end of the run's history for the named checks) and the path of the
// history file, which names its model (linearize.ReadFile and `lockproof
// history` read it, check it again and draw it) (-propertytest.out, LOCKPROOF_PROPERTYTEST_OUT, else the test's
// temporary directory); rapid shrinks the run and prints -rapid.seed to
// replay it. Violation.Evidence holds the same history and the checker's
// result as data.
//
// # Limits
//
// Replays are exact on backends in manual time whose locks keep no timers
// of wall time. A lock or client that waits on wall-time timers (Redlock's
// per-node request timeout, redsync's retry back-off), a backend in real
// time (the embedded etcd, a real server) and tests running in parallel
// in the same process can still move on their own: their replays are best
// effort, and a run in which the scheduler gave up waiting for quiescence
// says so in its log. Requests a lock sends on a context of its own (a
// watchdog, a background clean-up) are not gated. Leases without fencing
// tokens (Redlock) get tokens numbered in the order the backend granted
// them (at locks.PointAcquired, else when the call returned), in steps of
// 65536 that leave room for the unknown acquires (a client that died in
// TryLock) the model may place between two grants. A failing run is
// shrunk by rapid within -rapid.shrinktime (suitemain.Main sets 2s; rapid's own
// default is 30s), and each history check shrinks its counterexample
// within CheckSteps of its own.
package propertytest
