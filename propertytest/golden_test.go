package propertytest_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/replay's golden traces from this build")

// TestSeedReplaysAcrossProcesses: a seed's runs match, byte for byte, the
// traces an earlier build of the suite wrote to testdata/replay, so the
// replay a user gets from a report's seed does not depend on the process
// (map order, addresses, hash seeds) or on the machine. TestSeedReplaysExactly
// compares two replays in one process, which such a cause would pass.
// After a change that means to alter the runs of a seed, rewrite the
// traces with -update and review their diff.
func TestSeedReplaysAcrossProcesses(t *testing.T) {
	cases := []struct {
		name    string
		factory propertytest.Factory
	}{
		{"memlock", backends.MemLock()},
		{"redislock", backends.RedisLock()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			suitemain.SetFlag(t, "rapid.checks", "2")
			suitemain.SetFlag(t, "rapid.seed", "20261128")
			got := strings.Join(propertytest.TraceRuns(t, c.factory, propertytest.Options{}), "\n=== next run\n")
			path := filepath.Join("testdata", "replay", c.name+".golden")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (write it with -update)", err)
			}
			if got != string(want) {
				t.Fatalf("seed 20261128 no longer replays %s:\n%s", path, firstDifference(string(want), got))
			}
		})
	}
}
