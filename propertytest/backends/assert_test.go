package backends

import (
	"slices"
	"testing"

	"github.com/lockproof/lockproof/propertytest"
)

// checkedEveryRun fails t unless rep made runs and checked each of props
// in every one of them.
func checkedEveryRun(t *testing.T, rep *propertytest.Report, props ...propertytest.Property) {
	t.Helper()
	if rep.Runs == 0 || slices.ContainsFunc(props, func(p propertytest.Property) bool { return rep.Checked[p] != rep.Runs }) {
		t.Fatalf("checks ran %v in %d runs", rep.Checked, rep.Runs)
	}
}

// noExpected marks t failed if rep found expected violations: the run
// injected no fault the lock does not claim, so there should be none.
func noExpected(t *testing.T, rep *propertytest.Report) {
	t.Helper()
	if len(rep.Expected) > 0 {
		t.Errorf("expected violations without unclaimed faults: %v\n%v", rep.Expected, rep.ExpectedExample)
	}
}

// caughtAs fails t unless rep failed with p among its broken properties,
// and logs each violation with the run that found it.
func caughtAs(t *testing.T, rep *propertytest.Report, p propertytest.Property) {
	t.Helper()
	if !rep.Failed || !slices.Contains(rep.Broken(), p) {
		t.Fatalf("not caught as %s: failed %v, broken %v\n%s", p, rep.Failed, rep.Broken(), rep.Output)
	}
	for _, v := range rep.Violations {
		t.Logf("caught at run %d: %s: %s", rep.FirstFailure, v.Property, v.Detail)
	}
}
