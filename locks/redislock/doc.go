// Package redislock is a fenced lock on one Redis server (or a primary with
// replicas), built on github.com/redis/go-redis/v9.
//
// Keys, all under one hash tag so a cluster keeps them in one slot:
// <prefix>{<name>} holds the owner of the current lease with a PX TTL;
// <prefix>{<name>}:fence is the fencing counter, incremented on every grant
// and never deleted, so tokens keep growing across releases and expiries;
// <prefix>{<name>}:queue is the FIFO of waiters.
//
// Every operation is one Lua script, so each is atomic on the server:
//
//   - acquire: if the key is free, SET it with a fresh random owner (128 bits
//     from crypto/rand, one per acquisition) and INCR the fence; otherwise
//     return the holder's remaining PTTL, and with Lock queue the waiter.
//   - unlock: only if the key holds our owner; then hand the lock straight to
//     the first queued waiter that is still listening (PUBLISH on its
//     Locker's channel returns how many receive it; a crashed waiter's
//     Locker receives nothing and is skipped), or delete the key when nobody
//     waits.
//   - renew: PEXPIRE only if the key holds our owner.
//
// Waiting is notified: a waiting Locker holds one pub/sub subscription for
// all its waiting goroutines; a hand-over arrives with its fencing token and
// costs the new holder no further request. A waiter also re-checks once the
// holder's remaining TTL (plus jitter) has passed, which covers a holder that
// crashed without unlocking. No fixed polling interval exists anywhere.
//
// What it does not survive: the loss of acknowledged writes. A Redis primary
// that fails over to a replica which had not yet received the lock key (Redis
// replication is asynchronous) lets a second client acquire while the first
// still holds a valid lease. The fencing token does not prevent that double
// grant, but a resource that checks tokens (locks.Fence) refuses whichever
// holder falls behind. Where that matters, use a consensus-backed lock.
package redislock
