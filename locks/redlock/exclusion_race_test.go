//go:build race

package redlock

// exclusionRounds is how many times each goroutine of TestExclusion takes the
// lock. Under the race detector go-redis and miniredis run several times
// slower; miniredis also builds a fresh Lua interpreter for every script
// (≈0.8 ms an EVALSHA on 2 cores), and an acquisition costs at least 5
// scripts and 5 transactions. Rounds are cut to keep the test near 5 s.
func exclusionRounds(realServers bool) int {
	if realServers {
		return 50
	}
	return 20
}
