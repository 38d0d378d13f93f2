// Package redislock is a fenced lock on one Redis server (or a primary with
// replicas), built on github.com/redis/go-redis/v9.
//
// Keys, all under one hash tag so a cluster keeps them in one slot:
// <prefix>{<name>} holds the owner of the current lease with a PX TTL;
// <prefix>{<name>}:fence is the fencing counter, incremented on every grant
// and never deleted, so tokens keep growing across releases and expiries;
// <prefix>{<name>}:queue is the FIFO of waiters.
//
// Each operation is one round trip:
//
//   - acquire: SET NX PX with a fresh random owner (128 bits from
//     crypto/rand, one per acquisition), pipelined with INCR of the fence
//     (an attempt that loses leaves a gap in the tokens, never a repeat);
//     Lock then queues the waiter with RPUSH, pipelined with PTTL of the
//     holder.
//   - unlock, a Lua script: only if the key holds our owner; then hand the
//     lock straight to the first queued waiter that is still listening
//     (PUBLISH on its Locker's channel returns how many receive it; a
//     crashed waiter's Locker receives nothing and is skipped), or delete
//     the key when nobody waits.
//   - renew, a Lua script: PEXPIRE only if the key holds our owner.
//   - a waiter's re-check after its timer, a Lua script: take the lock if
//     it is free, else make sure the waiter is still queued.
//
// Waiting is notified: a waiting Locker holds one pub/sub subscription for
// all its waiting goroutines; a hand-over arrives with its fencing token and
// costs the new holder no further request. A waiter also re-checks once the
// holder's remaining TTL (plus jitter) has passed, which covers a holder that
// crashed without unlocking. No fixed polling interval exists anywhere.
//
// Semaphore (NewSemaphore) is a counting semaphore of N permits on the same
// server: a sorted set of the permit holders scored by the end of their
// leases on the server's clock, pruned by every script before it counts,
// a FIFO of waiters and a fencing counter shared by all permits. Each
// permit is a lease as the lock's is; waiters queue and are handed a
// permit, as the lock's are, one per permit freed. Every Semaphore of one
// name must be made with the same number of permits.
//
// RWMutex (NewRWMutex) is a read-write lock on the same server: its
// RLocker and Locker views are Lockers of shared and exclusive leases,
// kept in sorted sets by the end of their leases on the server's clock
// (RWKeys), with one FIFO of waiters of either mode and one fencing
// counter for readers and writers. A reader that finds anyone waiting
// queues behind them, so overlapping readers do not starve a writer; a
// release hands the lock to the writer at the head of the queue, or to
// the readers there up to the first writer, and wakes nobody else.
//
// What it does not survive: the loss of acknowledged writes. A Redis primary
// that fails over to a replica which had not yet received the lock key (Redis
// replication is asynchronous) lets a second client acquire while the first
// still holds a valid lease. The fencing token does not prevent that double
// grant, but a resource that checks tokens (locks.Fence) refuses whichever
// holder falls behind. Where that matters, use a consensus-backed lock.
package redislock
