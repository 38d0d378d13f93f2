// Package miniconsul is an in-memory Consul HTTP API: enough of it for the
// official client (github.com/hashicorp/consul/api) to use KV, sessions,
// locks and blocking queries against a server that starts in well under a
// millisecond and whose time is an input.
//
// Start a Server with Start (127.0.0.1, a port chosen by the kernel) and
// point api.Config.Address at Addr. In tests, consulfake.New does that and
// cleans up.
//
// What it serves, with Consul's semantics and messages, checked against a
// real agent by its differential tests (run with LOCKPROOF_CONSUL_ADDR
// naming an agent's HTTP address) and consulfake's; consul/api's own
// KV, session, lock, semaphore and status tests pass on it and on the
// agent (tools/peersuites):
//
//   - /v1/kv/<key>: GET of one key, ?recurse, ?keys with ?separator, ?raw;
//     PUT with ?flags, ?cas, ?acquire, ?release; DELETE with ?recurse,
//     ?cas. Entries carry CreateIndex, ModifyIndex, LockIndex, Flags and
//     Session. A write equal to the existing entry changes nothing (not even
//     ModifyIndex); a plain PUT keeps the entry's session but, as on Consul,
//     resets its LockIndex to 0.
//   - /v1/session/create, destroy, renew, info, list and node: TTL, Behavior
//     (release or delete), LockDelay, Name, checks (the node has one,
//     serfHealth, always passing; a session naming another check, or any
//     service check, is refused: "apply failed: Missing check '<id>'
//     registration").
//   - /v1/txn with KV operations (set, cas, lock, unlock, get, get-or-empty,
//     get-tree, delete, delete-cas, delete-tree, check-index,
//     check-session, check-not-exists): a transaction of reads is served at
//     once; one with writes is checked as the leader checks it (a key
//     given, no lock under lock-delay) and applied at one index, all or
//     nothing: 409 with every error and the agent's messages, else 200 with
//     the results (a write's without its value). A transaction of reads
//     also carries the read path's query metadata (Index 1, KnownLeader),
//     zero when the pre-checks (a known verb, a key) refuse it. At most
//     MaxTxnOps operations; catalog operations get 501.
//   - The lock-delay race of a Consul leader, on request: the leader checks
//     a lock's lock-delay before the write goes to Raft, so an invalidation
//     that commits in between is missed. miniconsul checks and applies at
//     once unless AfterLockDelayCheck sets a hook to run in between.
//   - /v1/status/leader and peers.
//   - The index: one raft-like index shared by every table, starting where
//     a fresh agent's stands before a client's first write (so that write
//     lands above 1); every write that reaches the raft log takes a fresh
//     one, a CAS that fails or a write that changes nothing included, and
//     only what changed gets it as its ModifyIndex.
//   - ?dc= of a datacenter other than the server's (WithDatacenter,
//     default dc1) is answered 500 "No path to datacenter" on every
//     endpoint, after the checks the agent's HTTP layer makes.
//   - X-Consul-Index on every read, with the index Consul gives (a key's
//     ModifyIndex, or the KV table's index for a missing key), and the
//     leader headers the client parses.
//   - Blocking queries (?index, ?wait; default wait 5 min, at most 10): woken
//     by the change itself through channels, never by polling, or ended by
//     the wait on the server's clock. A missing key is reported only when it
//     appears or the wait ends, as on Consul. No jitter is added to the wait.
//   - Errors: 400 for malformed arguments (bad wait or index, conflicting
//     flags, missing key or session), 404 for renewing an unknown session,
//     405 for a wrong method, 500 with Consul's text for what its server
//     refuses (TTL outside [session TTL minimum, 24h], unknown behaviour,
//     acquire with an unknown or missing session).
//
// Time: session TTLs, lock-delays and blocking waits follow the Clock given
// with WithClock (a manual fakes.Clock in tests). Consul only promises that
// a session is not invalidated before its TTL; its server invalidates it
// TTL × 2 after the last renewal (SessionTTLMultiplier). miniconsul does the
// same by default, exactly at TTL × 2; WithSessionTTLMultiplier(1) makes it
// exactly TTL, the strictest server a client may meet
// (consulfake.SessionTTLMultiplier(1) starts it so). Expiry is checked
// before every request as well as by timers, so right after a manual clock
// moves, the next request sees every session that ran out as gone. A
// session's lock-delay starts on each key it held when it is invalidated
// (expiry or destroy, not a release) and is capped at MaxLockDelay; an
// acquire during it answers false.
//
// Controls for tests: InvalidateSession (expire or destroy a session now),
// Sessions, LockDelay, Blocked and WaitBlocked (wait until clients are
// parked in blocking queries), Index. The clock is advanced by its owner.
//
// Not modelled: ACLs, namespaces and partitions, other datacenters (one
// server, one datacenter), transactions on the catalog, health checks
// beyond serfHealth (which never fails), consistency modes (every read is
// consistent: there is one server), the catalog and the agent endpoints
// (consul/api's two session tests that register through the catalog are
// not applicable), a dev agent's indented JSON.
package miniconsul
