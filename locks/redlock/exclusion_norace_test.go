//go:build !race

package redlock

// exclusionRounds is how many times each goroutine of TestExclusion takes the
// lock: the full 200 on real servers; 80 on miniredis, whose scripts cost
// ≈0.17 ms each (a fresh Lua interpreter per EVALSHA).
func exclusionRounds(realServers bool) int {
	if realServers {
		return 200
	}
	return 80
}
