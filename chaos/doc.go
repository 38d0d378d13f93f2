// Package chaos injects the faults that break distributed locks — network,
// process and backend faults — in-process, and names them: Kind is the
// project's one fault vocabulary, the kinds a lock claims to survive in
// propertytest.Options.Claims.
//
// Network faults go through Proxy, an in-process TCP proxy per
// client↔server link: point a client at Proxy.Addr and add latency, cut one
// direction (holding or dropping its bytes), drop only the replies, reset
// connections or refuse new ones, while traffic flows.
//
// A Proxy can also feed a replica asynchronously (Replicate, with a lag) and
// fail over to it (Promote), losing the requests of the last lag: Redis's
// asynchronous replication, for any Redis-protocol server.
//
// Process faults go through the locks.Observer hook: Pause stops a client at
// a named point for a while, as a GC pause would.
//
// When and to whom a fault happens is not chaos's business: propertytest
// draws every fault from its run's seed, so a seed replays it and rapid
// shrinks it away when it does not matter.
//
// The tests of this package are the scenarios: each one detects the
// violation a fault causes, or shows its absence where the lock claims to
// survive the fault.
package chaos
