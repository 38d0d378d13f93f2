package clusters

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lockproof/lockproof/linearize"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// mysqllock on a 3-node Galera cluster: without the skew it keeps every
// property (the known-good case); with member 2's clock skewed ahead, the
// expected outcome, stated before the run, is an expected exclusivity
// violation (a lease granted on another member looks expired on member 2,
// whose client takes the lock over from a holder that still holds it), no
// claimed property broken, and the two-holder history saved as JSON that
// linearize finds Illegal.
func TestMySQLLockOnGaleraSkewedClock(t *testing.T) {
	g := Galera(t)
	withSkew := g.MySQLLock()

	o := fewRuns(t, 2, GaleraOptions())
	suitemain.SetFlag(t, "rapid.steps", "12")
	began := time.Now()
	rep := propertytest.Check(t, withoutFaults(withSkew), o)
	logReport(t, "mysqllock on Galera, no skew", rep, time.Since(began))
	if rep.Failed || rep.Runs == 0 || rep.Checked[propertytest.Exclusivity] != rep.Runs || len(rep.Expected) > 0 {
		t.Fatalf("without the skew: failed %v, broken %v, expected %v, checked %v\n%s",
			rep.Failed, rep.Broken(), rep.Expected, rep.Checked, rep.Output)
	}

	// A run breaks exclusivity when the skew is on while another client
	// holds the lock and one of member 2 asks for it. The fault strikes
	// around acquisitions (AtAcquire), and every other locker talks to
	// member 2: 4 of 10 runs of 30 steps measured did, where 4 of 22
	// runs of 12 steps did when only the Fault action struck. Rounds of 3
	// runs, up to 3, stop at the first; a round takes 1 to 3 minutes: give
	// the test -timeout 15m.
	const rounds = 3
	o = fewRuns(t, 3, GaleraOptions())
	suitemain.SetFlag(t, "rapid.steps", "30")
	t.Log("expected: exclusivity broken under the unclaimed clock skew, nothing claimed broken")
	for round := 1; round <= rounds; round++ {
		o.OutDir = t.TempDir()
		began := time.Now()
		rep := propertytest.Check(t, withSkew, o)
		logReport(t, fmt.Sprintf("mysqllock on Galera with a skewed clock, round %d", round), rep, time.Since(began))
		if rep.Failed {
			t.Fatalf("a claimed property broke: %v\n%s", rep.Broken(), rep.Output)
		}
		if rep.Expected[propertytest.Exclusivity] == 0 {
			continue
		}
		if v := rep.ExpectedExample; v != nil {
			t.Logf("an expected violation: %s: %s (unclaimed: %v)", v.Property, v.Detail, v.Unclaimed)
		}
		// Each property's latest history in the round is its file there.
		files, err := filepath.Glob(filepath.Join(o.OutDir, "*-"+string(propertytest.Exclusivity)+"*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("the expected exclusivity violation's history was not written (%v)", err)
		}
		for _, f := range files {
			if verdict := recheck(t, f); verdict != linearize.Illegal {
				t.Fatalf("%s checks again as %v, want %v", f, verdict, linearize.Illegal)
			}
			t.Logf("%s checks again as %v", filepath.Base(f), linearize.Illegal)
		}
		return
	}
	t.Fatalf("no skewed clock broke exclusivity in %d rounds of runs", rounds)
}

// withoutFaults is f's backend without its faults.
func withoutFaults(f propertytest.Factory) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		be, err := f(env)
		if err != nil {
			return nil, err
		}
		be.Faults = nil
		return be, nil
	}
}

// Every other locker talks to the skewed member, and the others to
// members 0 and 1 in turn, so that every member serves clients.
func TestMemberOf(t *testing.T) {
	var got []int
	for i := range 8 {
		got = append(got, memberOf(i))
	}
	if want := []int{2, 0, 2, 1, 2, 0, 2, 1}; !slices.Equal(got, want) {
		t.Fatalf("members of lockers 0 to 7: %v, want %v", got, want)
	}
}
