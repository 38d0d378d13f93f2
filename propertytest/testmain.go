package propertytest

import (
	"flag"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/lockproof/lockproof/fakes"
)

// checksGiven records whether -rapid.checks was on the command line, as
// Main found it.
var checksGiven atomic.Bool

// Main runs a package's tests with short defaults for the suite, and a
// goroutine-leak check at the end (fakes.VerifyNoLeaks, allowing for the
// port allocator of a real Consul agent: fakes.IgnoreConsulPorts). Call it
// from TestMain. Unless given on the command line, rapid runs 15 checks per
// property test, shrinks for at most 2 s and writes no fail files (the
// seed printed with every failure replays it); with LOCKPROOF_DEEP=1 in
// the environment it runs 500 checks instead.
func Main(m *testing.M) {
	flag.Parse()
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	checksGiven.Store(given["rapid.checks"])
	defaults := map[string]string{
		"rapid.checks":     "15",
		"rapid.shrinktime": "2s",
		"rapid.nofailfile": "true",
	}
	if Deep() {
		defaults["rapid.checks"] = "500"
	}
	for name, v := range defaults {
		if given[name] {
			continue
		}
		if f := flag.Lookup(name); f == nil {
			panic("propertytest: no flag -" + name + ": is pgregory.net/rapid linked into the test?")
		}
		if err := flag.Set(name, v); err != nil {
			panic(err)
		}
	}
	fakes.VerifyNoLeaks(m, fakes.IgnoreConsulPorts()) // a test may start a real Consul agent
}

// Deep reports whether LOCKPROOF_DEEP=1 asks for the long runs.
func Deep() bool { return os.Getenv("LOCKPROOF_DEEP") == "1" }

// ChecksGiven reports whether -rapid.checks was given on the command line
// (known once Main has run).
func ChecksGiven() bool { return checksGiven.Load() }

// SetChecks sets rapid's check count to n for one test, and back at its
// end: fewer for a slow test, more for a mutant (rapid stops at the first
// failure, so a mutant's runs cost only until it is caught). It does
// nothing when -rapid.checks was given or under Deep, which decide
// instead. Tests that call it must not run in parallel.
func SetChecks(t testing.TB, n int) {
	t.Helper()
	if ChecksGiven() || Deep() {
		return
	}
	SetFlag(t, "rapid.checks", strconv.Itoa(n))
}

// SetFlag sets the command-line flag called name (one of rapid's, such as
// rapid.steps or rapid.seed) to value for one test, and back at its end.
// An unknown flag or a bad value fails t. Tests that call it must not run
// in parallel.
func SetFlag(t testing.TB, name, value string) {
	t.Helper()
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("propertytest: no flag -%s: is pgregory.net/rapid linked into the test?", name)
	}
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatalf("propertytest: -%s=%s: %v", name, value, err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}
