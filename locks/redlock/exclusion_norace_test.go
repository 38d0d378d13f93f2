//go:build !race

package redlock

// exclusionRounds is how many times each goroutine of TestExclusion takes the
// lock: the full 200 on real servers; 30 on miniredis, whose scripts cost
// ≈0.17 ms each (a fresh Lua interpreter per EVALSHA): 80 rounds, 2,560
// contended acquisitions at about 20 transactions each, took 19-29 s, the
// most of any test of the package; 960 still see every contention pattern
// the test counts (splits, retries, hand-offs).
func exclusionRounds(realServers bool) int {
	if realServers {
		return 200
	}
	return 30
}
