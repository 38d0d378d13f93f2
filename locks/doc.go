// Package locks is the contract every lock in lockproof implements, and the
// pieces they share.
//
// A Locker acquires one named lock on one backend; each acquisition is a
// Lease. A lease carries a fencing Token (strictly increasing per lock name,
// from the backend), a local Deadline, and a Done channel that closes once the
// lease is released, expires or is known lost. The backends live in the
// sub-packages:
//
//   - redislock: one Redis server; fenced; FIFO hand-over by notification.
//   - redlock: N independent Redis servers, majority quorum; no fencing
//     token (Token returns ok == false).
//   - etcdlock: an etcd lease and a revision-ordered queue, each waiter
//     watching only its predecessor; fenced by the create revision.
//   - consullock: a Consul session and a KV acquire; fenced by the key's
//     ModifyIndex; waiters queue on the server.
//   - mysqllock: a row of a MySQL or MariaDB table on the server's clock;
//     fenced; a lost reply settled by reading the row back.
//   - zklock: ZooKeeper ephemeral sequential nodes, each waiter watching
//     only its predecessor; fenced by the node's czxid; the session is the
//     lease.
//
// lockbench is the harness that measures them against their peers (go
// test -bench and lockproof bench).
//
// The index:
//
//   - Locker, Lease, Token: the contract.
//   - Fence: an in-memory resource that refuses stale tokens, to protect
//     storage and to see stale writers rejected in tests.
//   - Options, Option, Resolve, ValidateName, Drift: settings shared by all
//     locks (TTL, watchdog, wait budget, request timeout, key prefix, clock,
//     logger, observer, max hold, owner) and their validation.
//   - ManagedLease, NewLease, LeaseOps: the lease machinery (deadline,
//     watchdog, Done, double-unlock rules, the max hold of WithMaxHold) for
//     lock authors: a backend supplies owner-checked Renew and Release,
//     NewLease does the rest.
//   - WithOwner, Reentry: re-entry by owner identity. A backend passes its
//     Lock and TryLock through Reentry.Acquire; holds of one owner share one
//     acquisition and its token, and the last Unlock releases it.
//   - Clock, SystemClock, Timer: time as an input (tests use fakes.Clock).
//   - Gate, WithGate, GateOf, GateRequest: the request seam. A context may
//     carry a Gate that every backend request made with it passes through
//     first, so that a scheduler can order the requests of concurrent
//     operations and stall one between two of its round trips.
//   - Observer, Point, Event: hooks at named points of a client's use of a
//     lock, where chaos pauses or crashes clients. Unused, they cost a nil
//     check.
//   - The sentinel errors: ErrLocked, ErrNotHeld, ErrLeaseExpired,
//     ErrReleased, ErrMaxHold, ErrWaitBudget, ErrNoQuorum, ErrInvalidName, ErrInvalidTTL,
//     ErrInvalidOption, ErrNilClient, ErrStaleToken, ErrNoFencing. Backends wrap
//     them with %w; test with errors.Is.
//
// Validity: a lease is valid from the moment the request that granted (or
// last renewed) it was sent, for TTL minus Drift(TTL). The backend started
// its TTL later than that, so the local deadline ends no later than the
// backend's, as long as clocks run at rates within the drift allowance. A
// holder that may pause longer than that (GC, swapping, a VM migration) must
// not rely on the deadline alone: it passes its token to the resource, which
// refuses stale ones (see Fence).
package locks
