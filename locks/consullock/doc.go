// Package consullock is a fenced lock on Consul, built on the official
// client github.com/hashicorp/consul/api: a session with a TTL and KV
// acquire.
//
// One acquisition, step by step:
//
//   - create a session (PUT /v1/session/create): TTL the lease TTL,
//     Behavior "release", the Locker's lock-delay. Every Lock or TryLock
//     call has a session of its own: the session is the owner, so two
//     goroutines sharing a Locker never share ownership.
//   - acquire: PUT /v1/kv/<prefix><name>?acquire=<session>.
//   - read the key back (a consistent read) for the fencing token.
//   - while held: the lease (locks.ManagedLease) renews the session every
//     TTL/3 (PUT /v1/session/renew) and a monitor goroutine watches the key
//     with blocking queries. Done closes as soon as the monitor sees the key
//     leave the session (session invalidated on the server, key released or
//     deleted by someone else), or a renewal finds the session gone (404),
//     or the lease's local deadline passes without a successful renewal
//     (server unreachable): always within the TTL. hashicorp/consul#18271
//     reports api.Lock missing such losses.
//   - unlock: PUT ?release=<session>, then destroy the session. Releasing
//     first matters: destroying a session that still holds the key starts
//     the lock-delay for everybody.
//
// After a loss, the same Locker acquires again with a new session
// (hashicorp/consul#4902: api.Lock could not).
//
// Renewal through ManagedLease rather than api.Session.RenewPeriodic (TTL/2):
// one watchdog for every lock of lockproof, renewing at TTL/3 with retries
// while time is left, and a local deadline of (last renewal sent) + TTL −
// Drift(TTL). Consul invalidates a session no earlier than its TTL after the
// last renewal (in practice TTL × 2), so the local deadline always ends
// first. A session waiting in Lock is renewed every TTL/2.
//
// The fencing token is the key's ModifyIndex as read, with a consistent
// read, right after the acquire and while the key still shows our session;
// otherwise the attempt counts as lost and starts over. ModifyIndex is a
// Raft index: one counter for every write of the cluster, never reused. The
// read happens after our acquire (index a) and before anything ends our hold
// (index r, a release, an invalidation or a deletion, since the read still
// saw our session), so the token t satisfies a ≤ t < r. The next acquisition
// is a write after r, and its token is at least its own index: tokens
// strictly increase. LockIndex, which Consul increments on every acquire,
// is not used: it belongs to the key, so it restarts at 1 when the key is
// deleted and recreated (and a plain PUT on the key sets it to 0). A
// snapshot restore that rolls the Raft index back breaks the ModifyIndex
// argument too; restoring a snapshot under live locks breaks any lock.
//
// Waiting is never a poll. A Lock call first tries the key once; when it is
// held, the call joins the lock's queue: a key <key>/.queue/<session>,
// acquired by the call's session, so that Consul releases it when the
// session is invalidated. Waiters are ordered by their entries'
// CreateIndex. A waiter with a live entry ahead of it blocks on that one
// entry (GET ?index=&wait=), so a release wakes the next waiter in line
// and nobody else; released entries (sessions gone) are deleted by
// whoever lists the queue and finds them. A holder keeps its entry until
// it unlocks: the unlock releases the key, deletes the entry (which wakes
// the next waiter, who finds the key free) and destroys the session. The
// queue only decides who looks when; the key's acquire alone decides who
// holds the lock, so callers that do not queue (TryLock, other clients)
// may take a free key first, and a waiter whose wait for its predecessor
// times out (every TTL/2, when it renews its session) reads the key and
// tries it if free, so an entry that stalls cannot stall the lock. Lock
// calls sharing a Locker also queue locally (in arrival order), and only
// the first is on the server's queue.
//
// The waiter at the head of the queue blocks on the lock key itself and
// attempts the acquire only when a read shows the key free. The first
// read is immediate; each later one waits for the index to move past the
// last seen. Every blocking query waits for no longer than the wait budget
// left (recomputed after every wake-up and enforced on the Locker's clock,
// since Consul adds up to 1/16 of jitter to a wait), half the session TTL
// (the waiting session is then renewed) and five minutes. An index that
// goes backwards restarts from 0. A waiter whose session is lost starts
// over with a new one at the back of the queue.
//
// Lock-delay: after a session holding the lock is invalidated, Consul
// refuses the key to every acquire for the session's lock-delay, and does
// not say until when. A waiter whose acquire fails on a key that reads free
// assumes the holder used the same lock-delay as its own Locker: it waits
// by a blocking query (woken early if the key changes) until that long
// after it first saw the key free, then retries, backing off (1/8 of the
// lock-delay, doubling, at most the TTL) should the delay prove longer.
// The default lock-delay is the TTL (capped at Consul's maximum, 60s):
// a holder whose session is destroyed under it has a local deadline at most
// one TTL away, so nobody else gets the lock before that deadline. Give
// every Locker of one name the same lock-delay.
//
// Consul checks the lock-delay on its leader before an acquire goes to
// Raft, so an acquire checked just before an invalidation commits and
// applied just after it wins inside the lock-delay (on Consul 1.21, four
// clients acquiring in a loop took a just-invalidated key within 9 ms in
// 15 of 20 rounds). The Locker closes that hole: its acquire is a
// transaction that also reads the key as it was, every key it acquires is
// marked (Flags, see the source) so that a key freed by an invalidation
// shows it, and an acquire that finds such a key gives it back and
// acquires again, this time checked after the invalidation. Keys written
// by an older consullock, or by another library, carry no mark: a Locker
// sharing a name with them does not close the hole for their holders.
//
// Validation: TTL within Consul's session range, [10s, 24h] by default
// (locks.ErrInvalidTTL); a server configured with a lower session_ttl_min is
// declared with Session.TTLMin. Lock-delay 0 or within [1ms, 60s]
// (locks.ErrInvalidOption). Names must make a clean KV path without a
// ".queue" or ".permit" segment (locks.ErrInvalidName).
//
// The semaphore (NewSemaphore) is N such locks: permit i is the key
// <prefix><name>/.permit/<i> (PermitKey), acquired with a session exactly
// as the mutex's key is, with the same lease, monitor, unlock and
// lock-delay. So Consul itself takes back the permit of a holder whose
// session is invalidated, and no client removes another's: Consul's own
// api.Semaphore keeps its limit and its holders' sessions in one entry,
// <prefix>/.lock, rewritten by check-and-set on every acquire and release,
// whose dead holders are pruned only when a contender next writes it. What
// that entry gives and this layout does not: api.Semaphore refuses a
// contender whose limit differs from the entry's (ErrSemaphoreConflict;
// the limit stays until the entry is destroyed, hashicorp/consul#933),
// where Semaphores of one name made with different permits here simply
// use different numbers of keys. The token is the permit key's ModifyIndex read right
// after the acquire: a Raft index, so the argument above makes tokens
// strictly increase across all permits. A TryLock lists the permits once
// and tries the free ones in turn. A Lock queues as the mutex's does, in
// <prefix><name>/.queue/: behind another waiter it blocks on that
// waiter's entry; at the head, by one blocking query on the permits'
// prefix, it tries the free ones whenever the prefix moves, with the
// mutex's lock-delay wait when every free permit refuses it. Granted a
// permit, the head deletes its entry at once, which wakes the next
// waiter, the new head. So a release wakes one waiter, not every waiting
// Semaphore of the name, and waiters are served in the order they
// queued (TryLock does not queue, and may come first).
//
// The read-write mutex (NewRWMutex) is a mutex's key used as a turnstile,
// plus one key per reader (RWKeys): the writer's key <prefix><name>, the
// readers' keys <key>/.reader/<session>, and the mutex's queue
// <key>/.queue/. Readers and writers alike take the writer's key exactly
// as a mutex's Lock or TryLock takes its key: same sessions, queue,
// blocking queries and lock-delay. A reader holding it acquires its own
// key with the same session, reads that key's ModifyIndex back (its token),
// gives the writer's key up and leaves the queue; its lease is on its own
// key, watched by its monitor, and its Unlock releases and deletes it. A
// writer holding it keeps it and blocks on the readers' prefix until no
// reader's key is left; then it reads the writer's key back (its token, as
// a mutex's) and holds. What that guarantees:
//
//   - Readers or one writer: a reader's key is written only while its
//     session holds the writer's key, and a writer is granted only after
//     reading, with the writer's key held, that no reader's key is left.
//   - Tokens grow across both modes: grants are ordered by the writer's
//     key (a reader's at its key's write, which no other grant can come
//     between; a writer's from its acquire of the writer's key on), and
//     each token is the ModifyIndex, a Raft index, of a key written at the
//     grant, so the argument for the mutex's tokens holds.
//   - Writers are not starved: a writer waiting for the readers holds the
//     writer's key, so new readers queue behind it; waiters of both modes
//     are served in the order they queued (TryLock does not queue), so
//     readers are not starved by writers either.
//   - Lock-delay: the writer's key has the mutex's. A reader's key
//     released but left behind (its session invalidated, its holder
//     perhaps still in its lease) is probed by the waiting writer, which
//     acquires it (Consul refuses under the lock-delay) and deletes it.
//
// What it costs: a reader's admission is five requests (session, the two
// acquires, the read-back, the release; six when it queued, to delete its
// entry), and readers are admitted one at a time, each holding the
// writer's key for those requests: a reader's TryLock is refused while
// another reader is being admitted, which the read-write lease model
// allows (a reader may be refused while only readers hold). An attempt
// that loses the writer's key before its grant ends its Lock call with an
// error rather than starting over (see RWMutex). Consul's api
// has no read-write lock to compare with: api.Semaphore holds N, any N,
// with no mode, and api.Lock one. A reader cannot upgrade to a writer.
package consullock
