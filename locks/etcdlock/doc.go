// Package etcdlock is a fenced lock on an etcd cluster, built on
// go.etcd.io/etcd/client/v3.
//
// Each contender (a Lock or TryLock in progress, then the lease it returns)
// has an etcd lease of its own, its session, and puts the key
// <prefix><name>/<lease id in hex> bound to it (New). The holder is the key
// with the smallest create revision under <prefix><name>/, which is also the
// fencing token: it strictly increases from one holder to the next.
//
//   - Lock puts its key and reads its predecessor (the newest key created
//     before it) in one transaction. It then watches only that key's
//     deletion (no thundering herd), renewing its session meanwhile, and
//     after every wake-up checks in one transaction that its own key still
//     exists with its create revision, which proves its lease alive, and
//     finds its new predecessor, if any. A waiter whose lease was revoked or
//     expired gets an error wrapping ErrSessionLost and locks.ErrNotHeld; it
//     never believes it holds the lock (the gap of etcd-io/etcd#19597 in
//     concurrency.Mutex).
//   - TryLock is one transaction that puts the key only if no key of the
//     lock exists, so it leaves no key when it does not win.
//   - Unlock deletes the key only while its create revision is this
//     acquisition's, so it never releases another holder.
//   - The lease returned is a locks.ManagedLease: with the watchdog (the
//     default) it renews the session every TTL/3 and checks its key, and Done
//     closes once the session's lease is lost (ErrSessionLost) or cannot be
//     renewed in time. Without the watchdog the session lives one TTL from its
//     last renewal, as a crashed holder's would.
//   - A member's answer that a session's lease is gone is believed only once
//     a linearizable read finds the contender's key gone too; while the key
//     is there the keep-alive goes to the next member. An etcd leader cut off
//     from the others, until it steps down, answers keep-alives from its own
//     table and calls every lease granted since "not found" (etcd before
//     3.4.31 and 3.5.13; Debian's 3.4.23 does: fakes/lab's
//     TestEtcdCutOffLeaderDeniesNewLeases).
//
// Sessions are reused by later acquisitions of the same Locker while they
// live; nothing renews a session nobody uses, so a Locker needs no Close.
//
// NewNaive builds the deliberately naive variant, which exists only for the
// herd benchmark: every waiter watches the one lock key and all of them race
// when it is deleted.
//
// NewSemaphore is the same queue with N holders: the first N keys by create
// revision hold, each waiter waits for any of the N keys just ahead of its
// own to go (one watch of the prefix, other deletions passed over), and the
// token is still the key's create revision.
//
// NewRWMutex is the same queue with readers and writers in it, in the shape
// of etcd's recipe RWMutex: a reader's key is tagged "r", a writer's "w"; a
// reader holds once no writer's key precedes its own and watches the newest
// one that does, a writer watches the newest key of either kind before its
// own. Its RLocker and Locker are Lockers of the two modes.
//
// TTLs are at least one second: etcd leases last whole seconds. The server's
// lease is the TTL rounded up to whole seconds (etcd raises it further to its
// own minimum, 1.5 election timeouts); the local Deadline uses the TTL
// itself, which ends no later.
//
// The lock is as available as the cluster: with a majority of members up it
// works; without one, every request waits until its ctx ends and fails with
// ctx's error.
package etcdlock
