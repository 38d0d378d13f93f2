// Package chaos injects the faults that break distributed locks — network,
// time, process and backend faults — in-process, driven by a seed, printed,
// and replayable.
//
// Network faults go through Proxy, an in-process TCP proxy per
// client↔server link: point a client at Proxy.Addr and add latency, cut one
// direction (holding or dropping its bytes), drop only the replies, reset
// connections or refuse new ones, while traffic flows. Net groups proxies
// into a network of named nodes that can be partitioned.
//
// A Proxy can also feed a replica asynchronously (Replicate, with a lag) and
// fail over to it (Promote), losing the requests of the last lag: Redis's
// asynchronous replication, for any Redis-protocol server.
//
// Process faults go through the locks.Observer hook: Pause stops a client at
// a named point for a while, as a GC pause would.
//
// Nemesis schedules (Plan, Schedule.Run) are drawn from a seed and printed;
// ParseSchedule reads a printed one back, so a failing run replays.
//
// The tests of this package are the scenarios: each one detects the
// violation a fault causes, or shows its absence where the lock claims to
// survive the fault.
package chaos
