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
//
// Each mutant is registered by its file's init function. The package's
// tests check that every mutant is caught with its property named and
// that its bug-free twin (Mutant.Fixed) passes; mutants on a backend in
// real time (Mutant.RealTime: the embedded etcd) are caught only with
//
//	go test ./propertytest/mutants/ -run TestEveryMutantIsCaught -mutants.realtime
//
// or LOCKPROOF_DEEP=1, as they take up to a minute or more.
package mutants
