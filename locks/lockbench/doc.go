// Package lockbench measures locks: the latency of uncontended lock and
// unlock, and, under contention, the hand-off latency from one holder's
// Unlock to the next holder's Lock return, throughput, waits and how often
// the lock went back to the goroutine that had just released it.
//
// lockproof's benchmarks (go test -bench) and `lockproof bench` both run on
// it, so they report the same numbers. Any lock can be measured: adapt it to
// Worker (FromLocker does it for a locks.Locker).
//
// Contend also checks exclusion as it goes: two workers inside the critical
// section at once end the run with ErrExclusion.
package lockbench
