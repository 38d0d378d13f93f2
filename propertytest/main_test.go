package propertytest

import (
	"flag"
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

// TestMain keeps the default run short: unless given on the command line,
// rapid runs 15 checks per property test and shrinks for at most 2 s, and
// writes no fail files (the seed printed with every failure replays it).
// LOCKPROOF_DEEP=1 runs 500 checks instead.
func TestMain(m *testing.M) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	defaults := map[string]string{
		"rapid.checks":     "15",
		"rapid.shrinktime": "2s",
		"rapid.nofailfile": "true",
	}
	if os.Getenv("LOCKPROOF_DEEP") == "1" {
		defaults["rapid.checks"] = "500"
	}
	checksExplicit = set["rapid.checks"]
	for name, v := range defaults {
		if !set[name] {
			if err := flag.Set(name, v); err != nil {
				panic(err)
			}
		}
	}
	goleak.VerifyTestMain(m)
}

// checksExplicit records whether -rapid.checks was given.
var checksExplicit bool

// setChecks sets rapid's check count to n for one test, unless
// -rapid.checks was given or LOCKPROOF_DEEP is set: fewer for a slow test,
// more for a mutant (rapid stops at the first failure, so a mutant's runs
// cost only until it is caught).
func setChecks(t *testing.T, n int) {
	if checksExplicit || os.Getenv("LOCKPROOF_DEEP") == "1" {
		return
	}
	old := flag.Lookup("rapid.checks").Value.String()
	if err := flag.Set("rapid.checks", strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set("rapid.checks", old) })
}
