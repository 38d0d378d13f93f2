package mutants

import (
	"flag"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockproof/lockproof/propertytest"
)

// setRapid sets rapid's flags for one test: at most checks runs of steps
// actions on average, a short shrink, no fail files.
func setRapid(t *testing.T, checks, steps string) {
	t.Helper()
	for name, v := range map[string]string{"rapid.checks": checks, "rapid.steps": steps,
		"rapid.shrinktime": "1s", "rapid.nofailfile": "true"} {
		old := flag.Lookup(name).Value.String()
		if err := flag.Set(name, v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = flag.Set(name, old) })
	}
}

// TestBackendMutantsAreCaught: the suite catches each backend mutant and
// names the property it breaks first. The etcd one runs in real time
// (seconds per run); rapid stops at the first failing run.
func TestBackendMutantsAreCaught(t *testing.T) {
	for _, c := range []struct{ name, checks, steps string }{
		{"mysql-takeover-without-expiry-check", "50", "30"},
		{"consul-ignores-session-invalidation", "400", "30"},
		{"etcd-waiter-without-recheck", "25", "10"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // registered first: runs last
			m, err := Lookup(c.name)
			if err != nil {
				t.Fatal(err)
			}
			setRapid(t, c.checks, c.steps)
			began := time.Now()
			rep := propertytest.Check(t, m.Factory, m.Options)
			broken := rep.Broken()
			if !rep.Failed || len(broken) == 0 || broken[0] != m.Breaks {
				t.Fatalf("%s not caught as %s: failed=%v broken=%v in %d runs\n%s", m.Name, m.Breaks, rep.Failed, broken, rep.Runs, rep.Output)
			}
			t.Logf("caught as %v at run %d (%d runs with shrinking) in %v, seed %d: %s",
				broken, rep.FirstFailure, rep.Runs, time.Since(began).Round(time.Millisecond), rep.Seed, rep.Violations[0].Detail)
		})
	}
}
