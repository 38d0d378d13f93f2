// Package redlock implements the Redlock algorithm: one lock held on a
// majority of N independent Redis servers, so that it survives the loss of
// any minority of them.
//
// # No fencing token
//
// A Redlock lease has no fencing token: Lease.Token returns ok == false.
// Each node could count its acquisitions, but two acquisitions may be
// recorded by two different majorities, whose counters need not agree, so no
// number derived from them is guaranteed to increase from one holder to the
// next. Redlock's exclusion therefore rests on timing alone: on the lease's
// validity (TTL minus the time the acquisition took minus locks.Drift),
// which holds only while clocks drift little and the holder is not paused
// (GC, swapping, a slow network) for longer than what is left of it. A holder
// paused past its deadline can still write after the next holder has started,
// and nothing downstream can refuse it.
//
// When a stale write must be impossible, not merely unlikely, use a lock
// that gives a fencing token, such as locks/redislock (one Redis server, a
// counter incremented on every grant), and check the token where the write
// lands (locks.Fence). Use redlock where a rare double grant is tolerable:
// to avoid duplicate work, or in front of a resource that checks for itself.
//
// # Acquiring
//
// One attempt (TryLock, and each attempt of Lock) takes a fresh random owner
// (locks.NewOwner) and sends SET key owner NX, with the TTL as expiry, to
// every node at once, each request bounded by the request timeout
// (locks.WithRequestTimeout). The lock is held when a majority,
// len(clients)/2+1, set it and the validity left, TTL - elapsed -
// locks.Drift(TTL) with elapsed measured on the Locker's clock, is positive.
// Otherwise the owner is deleted, owner-checked, from every node that set it
// or did not answer (a lost reply may hide a successful SET; a node that
// answered that another owner holds the key cannot hold this attempt's), and
// the attempt fails with:
//
//   - locks.ErrLocked when the nodes answered that other owners hold it;
//   - locks.ErrNoQuorum when fewer than a majority answered, or a majority
//     answered too late to leave any validity.
//
// Either error is joined (errors.Join) with a *NodeError per node that did
// not answer; context errors of a cancelled ctx come back wrapped as well.
//
// # Leases
//
// Leases are locks.ManagedLease: the local deadline, the watchdog (renewing
// every TTL/3 by default) and the Unlock rules are the same for every lock in
// lockproof. Renew resets the TTL, owner-checked, on every node and counts
// only when a majority did so within TTL - drift; it reports locks.ErrNotHeld
// once too many nodes answer that the owner is gone for a majority to be
// possible. Unlock deletes the key, owner-checked, on every node and
// publishes the release.
//
// # Waiting
//
// Lock waits on notifications, not on a ticker: it subscribes to
// <key>:released on every node that accepts, and wakes when the owner holding
// a majority releases the lock, or when the earliest key reported by the
// nodes would expire (plus a few ms of jitter). After a split vote among
// fresh contenders, which are all about to release their shares at once,
// it backs off for a random part of twice the attempt's duration instead, so
// that one of them goes first; a split that persists waits for any release.
// Every timer runs on the Locker's clock (locks.WithClock), so tests with a
// manual clock control it. Goroutines sharing a Locker share its
// subscriptions and queue locally, so a release wakes one waiter per Locker,
// not every goroutine.
//
// # Keys
//
// On every node the lock is the string key <prefix>{<name>} (prefix
// DefaultPrefix unless locks.WithPrefix), holding the owner, with the TTL as
// its expiry. Releases are published on <prefix>{<name>}:released.
package redlock
