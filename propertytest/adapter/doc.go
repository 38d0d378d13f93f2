// Package adapter turns a lock written elsewhere, described by a few
// functions, into a locks.Locker whose leases follow lockproof's
// client-side rules, so that propertytest can judge it. A Factory for
// propertytest builds one per client in its Backend.NewLocker (see the
// Example, and propertytest/thirdparty for five public libraries).
//
// What the kit does, so that an adapter does not have to:
//
//   - Deadlines. A lease's Deadline is the library's own, when the Grant
//     reports one (Grant.Deadline, read after the grant and after every
//     renewal: the suite then judges whether the backend honours it). Else
//     it is the start of the grant + TTL - locks.Drift(TTL), the start
//     being the first of: Grant.Start, set by the adapter; the moment the
//     last request named by Lock.Grants was let go, in the call that
//     granted; the moment the call began. Each is read on the Options'
//     Clock before the request it stands for is sent, so the Deadline is
//     never later than what a correct backend honours. A renewal moves it
//     the same way, from the moment the renewal was called.
//   - The lease's rules. Renew past the Deadline is refused locally
//     (locks.ErrLeaseExpired) without calling the library; Unlock past it
//     still calls the library's release and reports ErrLeaseExpired; a
//     second Unlock is locks.ErrReleased; a renewal or release answered
//     with locks.ErrNotHeld ends the lease; a lease granted already past
//     its Deadline is returned ended (Err wraps ErrLeaseExpired), as the
//     library granted it. Done closes at the Deadline (on the Clock), at
//     Unlock, or when Grant.Lost closes; Err reads the Clock, so it is
//     non-nil (and Done closed) from the instant the Deadline passes. The leases never renew themselves:
//     New refuses Options with the watchdog on.
//   - Observer points: locks.PointAcquired once the library granted,
//     before Lock or TryLock returns; PointBeforeRenew and
//     PointBeforeUnlock, as lockproof's own locks report them.
//   - TryLock from a blocking Lock. A library without a single attempt
//     gives Lock.WouldWait instead of Lock.TryLock: TryLock then runs the
//     library's Lock under a locks.Gate of the kit's, chained to the Gate
//     the caller's context already carries (the suite's scheduler), which
//     ends the attempt before the first request WouldWait names goes out
//     (a blocking query, a poller's second SET NX) and returns an error
//     wrapping locks.ErrLocked; a library that returns a grant although
//     its context was cancelled held the lock: the kit releases it and
//     returns an error that is not ErrLocked. This needs a client whose requests pass
//     locks.GateRequest (every client the fakes make does); a client
//     without that hook never meets the kit's Gate, and its TryLock waits
//     as Lock does.
//   - Errors: Locked and NotHeld wrap a library's "held by another" and
//     "not held" answers in locks.ErrLocked and locks.ErrNotHeld, keeping
//     the library's error in the chain. A Lock cut short by its context
//     returns an error wrapping the context's, whatever the library said.
//   - Crashes: WithCrash gives a Locker the Crash method of
//     propertytest.Crasher, which calls a hook that ends what the client
//     started (its connections severed, its keep-alives stopped).
//   - KeepAlive renews a waiter's session on the run's clock while the
//     library waits, for libraries whose waiters must keep renewing.
//
// The package imports only the standard library and locks, so that a
// downstream module may use it in its tests at little cost.
package adapter
