// Package mutants holds deliberately broken locks: each has one bug of a
// kind seen in real lock code, and the propertytest suite must catch it,
// naming the property it breaks. They exist to prove checkers (the suite,
// lockproof check, a user's own harness) able to fail; never use them to
// lock anything.
//
// The index:
//
//   - Mutant: one broken lock: its Name, the Bug in one sentence, the
//     property it Breaks, its Factory, the Options (the claims of the lock
//     it imitates) and, where there is one, the Fixed factory of the same
//     lock without the bug.
//   - All and Lookup: the registry, sorted by name.
//
// The mutants, by the file that defines them:
//
//   - memserver.go, an in-memory lock server with one bug flag:
//     unlock-without-owner-check (symmetry), grant-without-check and
//     shared-fencing-token (exclusivity), no-expiry (deadlock freedom).
//   - redis.go, a SET NX lock on one Redis with a fencing counter:
//     setnx-then-expire (the TTL is set by a second command, and a client
//     that dies between the two leaves a key that never expires: deadlock
//     freedom; the suite's CrashInTryLock action kills it there) and
//     fence-does-not-grow (the fencing counter expires with the lock, so
//     tokens start again at 1: exclusivity).
//   - unfenced.go, redislock with its fencing token thrown away:
//     redis-without-fencing-under-pause (a paused holder writes after the
//     next one: exclusivity) and no-renewal-while-work-outlasts-ttl (the
//     lease trusts a watchdog that does not exist: exclusivity).
//   - redlock.go, Redlock on five nodes: redlock-accepts-minority (two
//     nodes of five count as held: exclusivity, once a minority of nodes
//     went down and came back empty).
//   - singlenode.go: single-node-posing-as-three (a three-node backend whose
//     lock lives on node 0 alone: availability).
//   - etcd.go, consul.go, mysql.go, the backends' own:
//     etcd-waiter-without-recheck (a waiter takes any deletion under the
//     lock's prefix as its turn: exclusivity),
//     consul-ignores-session-invalidation (a renewal answered "no such
//     session" counts as a success: symmetry) and
//     mysql-takeover-without-expiry-check (the takeover UPDATE ignores the
//     holder's expiry: exclusivity).
//   - redisflaws.go, a SET NX PX lock whose grant draws its fencing token
//     in the same script, with one flaw each, every one a bug reported
//     against a real lock (the report is cited at the mutant):
//     unlock-get-then-del (Unlock is GET, compare, DEL in two commands:
//     symmetry), validity-adds-drift (the local deadline outlives the key by the
//     drift allowance), renew-ignores-refusal, renew-extends-any-owner and
//     renew-sets-without-owner-check (a renewal that lands after the key
//     went to another client counts as done, extends the other client's
//     key, or takes the key back), all exclusivity;
//     renewal-failure-only-logged (Done and Err never tell of the loss:
//     exclusivity).
//   - stamplock.go, a SETNX lock with its expiry in the value:
//     expired-takeover-get-then-set (two clients that read the same
//     expired value both take it over: exclusivity).
//   - fairqueue.go, a Redisson-style fair lock with a wait queue:
//     fair-queue-entry-left (a refused TryLock stays queued, first in line
//     once the holder unlocks: deadlock freedom).
//   - seqserver.go, an in-memory server of sequential nodes bound to
//     sessions (ZooKeeper's and etcd's lock recipe) whose every request
//     passes locks.GateRequest: refused-attempt-node-left (a refused
//     TryLock's node stays with its session: deadlock freedom),
//     deadline-from-reply (the lease's clock starts at the reply that
//     showed the node first, not at its creation: exclusivity) and
//     done-waits-for-server (Done closes only on the server's refusal of a
//     keep-alive, never at the deadline: exclusivity).
//   - zookeeper.go, zklock's recipe cut down (ephemeral sequential nodes
//     on minizk, each waiter watching its predecessor), each bug reported
//     against a real ZooKeeper lock (cited at zkFlaws):
//     zk-waiter-without-recheck (a waiter woken by its predecessor's
//     deletion holds without listing the children again: exclusivity),
//     zk-cancelled-waiter-node-left (a Lock that gives up leaves its node
//     queued: deadlock freedom) and zk-renew-checks-session-only (a
//     renewal proves the session, not the node: symmetry).
//   - reentrant.go, a reentrant lock kept on the server as Redisson's RLock
//     keeps it (a hash field per owner holding its count), each acquisition
//     used with a nested re-entry and its Unlock:
//     reentry-unlock-ignores-count (the nested Unlock frees the lock under
//     the outer hold) and reentry-resets-ttl (the nested re-entry sets the
//     key's TTL to its own, shorter lease time), both exclusivity.
//
// Most of the mutants of the last four files are caught only by a suite
// that interleaves the requests of concurrent operations, stalls clients
// at the Observer points, steps time to the edge of a lease's deadline
// and checks that a freed lock is free and a lost lease says so.
//
// Each mutant is registered by its file's init function. The package's
// tests check that every mutant is caught with its property named and
// that its bug-free twin (Mutant.Fixed) passes; reported_test.go walks each mutant of a
// reported bug through the schedule that shows it, without the suite. By default each mutant
// runs from a seed known to catch it (the corpus in mutants_test.go); the search from random
// seeds runs with
//
//	go test ./propertytest/mutants/ -run TestEveryMutantIsCaught -mutants.seeds=1
//
// (as CI does) or LOCKPROOF_DEEP=1 (10 seeds each), as a random seed can take a minute or more
// to catch a mutant, and minutes for the one on the embedded etcd, which keeps real time.
package mutants
