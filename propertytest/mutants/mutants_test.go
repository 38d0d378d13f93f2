package mutants

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/propertytest"
)

var realTime = flag.Bool("mutants.realtime", false, "also run the mutants whose backends keep real time (Mutant.RealTime)")

// killChecks is the number of runs a mutant is given to be caught by
// default; rapid stops at the first that catches it.
const killChecks = 300

// deepSeeds is how many seeds each mutant must be caught with under
// LOCKPROOF_DEEP=1.
const deepSeeds = 10

// Every registered mutant, backends' own included, is caught: the suite
// fails it (a claimed property, not an expected violation) and names the
// property it was built to break first, with the seed that replays it.
//
// Mutants on a real-time backend take from seconds to a minute or more to
// be caught, too long for the default go test ./...: they run with
// -mutants.realtime (as CI does) or LOCKPROOF_DEEP=1.
func TestEveryMutantIsCaught(t *testing.T) {
	for _, m := range All() {
		t.Run(m.Name, func(t *testing.T) {
			if m.RealTime && !*realTime && !deep() {
				t.Skip("a real-time backend: run with -mutants.realtime or LOCKPROOF_DEEP=1")
			}
			seeds := 1
			if deep() {
				seeds = deepSeeds
			}
			for i := range seeds {
				t.Run(fmt.Sprintf("seed-%d", i), func(t *testing.T) { assertCaught(t, m) })
			}
		})
	}
}

// assertCaught runs the suite on m once (up to killChecks runs).
func assertCaught(t *testing.T, m Mutant) {
	useRapid(t, killChecks)
	start := time.Now()
	rep := propertytest.Check(t, m.Factory, m.Options)
	took := time.Since(start).Round(time.Millisecond)
	if !rep.Failed {
		t.Fatalf("mutant %s survived %d runs in %v (%s)\nexpected violations: %v\n%s", m.Name, rep.Runs, took, m.Bug, rep.Expected, rep.Output)
	}
	broken := rep.Broken()
	if len(broken) == 0 || (broken[0] != m.Breaks && !slices.Contains(m.AlsoBreaks, broken[0])) {
		t.Fatalf("mutant %s: broken properties %v, want %s first (or one of %v)\n%s", m.Name, broken, m.Breaks, m.AlsoBreaks, rep.Output)
	}
	if rep.Seed == 0 || !strings.Contains(rep.Output, fmt.Sprintf("-rapid.seed=%d", rep.Seed)) {
		t.Errorf("the failure does not print the seed that replays it:\n%s", rep.Output)
	}
	v := rep.Violations[0]
	if v.History == "" {
		t.Errorf("the violation shows no history: %v", v)
	}
	if v.Evidence == nil {
		t.Errorf("the violation carries no evidence: %v", v)
	}
	if _, err := os.Stat(v.File); err != nil {
		t.Errorf("history file %q: %v", v.File, err)
	}
	t.Logf("killed %s: %s at run %d (%d runs with shrinking) in %v; replay the failure: -rapid.seed=%d\n%s",
		m.Name, broken[0], rep.FirstFailure, rep.Runs, took, rep.Seed, v.Detail)
}

// controlChecks is the number of runs the bug-free twin of each mutant
// must pass by default.
const controlChecks = 8

// The same locks on the same backends without their bug pass, with the
// mutants' own Options: a mutant is caught for its bug, not for the
// harness or the backend.
func TestFixedTwinsPass(t *testing.T) {
	checks := controlChecks
	if deep() {
		checks = 100
	}
	for _, m := range All() {
		t.Run(m.Name, func(t *testing.T) {
			if m.Fixed == nil {
				t.Skipf("mutant %s has no bug-free twin", m.Name)
			}
			useRapid(t, checks)
			start := time.Now()
			rep := propertytest.Check(t, m.Fixed, m.Options)
			if rep.Failed {
				t.Fatalf("the bug-free twin of %s was flagged: %v\n%s", m.Name, rep.Broken(), rep.Output)
			}
			t.Logf("passed %d runs in %v; checked: %v; expected violations: %v",
				rep.Runs, time.Since(start).Round(time.Millisecond), rep.Checked, rep.Expected)
		})
	}
}
