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
// Process faults go through the locks.Observer hook: Pause stops a client at
// a named point for a while, as a GC pause would.
package chaos
