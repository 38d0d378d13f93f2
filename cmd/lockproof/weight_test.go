package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/propertytest"
)

// A cell of weight w gets w shares of the budget: a slow cell of weight 3
// beside a fast one of weight 1 gets three quarters and makes the runs
// they buy, and the fast one the quarter left.
func TestBudgetFollowsTheWeights(t *testing.T) {
	slow := slowMemLock(100 * time.Millisecond)
	slow.weight = 3
	cells := []cell{slow, fastMemLock()}
	cfg := checkConfig{seed: 3, budget: 2 * time.Second, chunk: 10, steps: 10, outDir: t.TempDir(), shrink: time.Second}
	res := runMatrix(cells, cfg, newProgress(&bytes.Buffer{}, cells, cfg))
	s, f := res.Cells[0], res.Cells[1]
	if s.Share != 1.5 {
		t.Errorf("the slow cell of weight 3 had a share of %vs of a 2s budget, want 1.5s", s.Share)
	}
	if f.Share < 0.5 {
		t.Errorf("the fast cell had a share of %vs, want at least the 0.5s of its weight", f.Share)
	}
	// The share is spent, not only granted: the slow cell runs past the
	// even split's 1s (its runs take a little over 100ms each, so it stops
	// within one run of 1.5s). Its run count would depend on the
	// machine's load; the time it kept running does not.
	if s.Seconds < 1.2 {
		t.Errorf("the slow cell of weight 3 ran %.2fs (%d runs) of its 1.5s share, want at least 1.2s", s.Seconds, s.Runs)
	}
}

// A property still short when its cell ends is named under the verdict
// with a command that checks that cell alone long enough; a cell with
// every property passed is not named.
func TestMoreRunsHint(t *testing.T) {
	few := cellResult{Lock: "etcdlock", Faults: "crash", Runs: 5, Seconds: 25, WantedRuns: 20, WantedSeconds: 100,
		Props: []propResult{{Property: "symmetry", Status: statusTooFew, Checked: 1}, {Property: "exclusivity", Status: statusPass, Checked: 5}}}
	done := cellResult{Lock: "redislock", Faults: "crash", Runs: 90, Seconds: 7,
		Props: []propResult{{Property: "symmetry", Status: statusPass, Checked: 40}}}
	hint := moreRunsHint(checkResult{Budget: "90s", Cells: []cellResult{done, few}})
	want := "too few runs: etcdlock/crash (symmetry) wants about 20 more runs: lockproof check -locks etcdlock -faults crash -budget 2m0s"
	if hint != want {
		t.Errorf("budget mode:\n got %q\nwant %q", hint, want)
	}
	if hint := moreRunsHint(checkResult{Runs: 5, Cells: []cellResult{few}}); !strings.HasSuffix(hint, "-runs 25") {
		t.Errorf("runs mode: %q, want it to end in -runs 25", hint)
	}
	if hint := moreRunsHint(checkResult{Budget: "90s", Cells: []cellResult{done}}); hint != "" {
		t.Errorf("nothing short, yet: %q", hint)
	}
	// On a cluster, a property no run reached gets no guess of runs, and
	// says why; one checked by some runs still gets its estimate.
	lab := cellResult{Lock: "zklock", Faults: "leader", Cluster: "zookeeper", Runs: 5, Seconds: 60, WantedRuns: 10, WantedSeconds: 120,
		Props: []propResult{{Property: "symmetry", Status: statusTooFew, Unreached: true},
			{Property: "progress", Status: statusTooFew, Checked: 1}}}
	hint = moreRunsHint(checkResult{Budget: "90s", Cells: []cellResult{lab}})
	lines := strings.Split(hint, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "never reached: zklock/leader (symmetry) in 5 runs on real servers: ") ||
		!strings.HasPrefix(lines[1], "too few runs: zklock/leader (progress) wants about 10 more runs: ") ||
		!strings.HasSuffix(lines[1], " -clusters") {
		t.Errorf("cluster cell:\n%s", hint)
	}
	lab.Props, lab.WantedRuns = lab.Props[:1], 0
	if hint := moreRunsHint(checkResult{Budget: "90s", Cells: []cellResult{lab}}); strings.Contains(hint, "wants about") {
		t.Errorf("only an unreached property, yet a guess of runs: %q", hint)
	}
	one := lab // a cell stated to show a violation, stopped at its first run
	one.Runs = 1
	if hint := moreRunsHint(checkResult{Budget: "90s", Cells: []cellResult{one}}); !strings.Contains(hint, " in 1 run on real servers: ") {
		t.Errorf("one run: %q", hint)
	}
}

// runsWanted asks, for a property checked in n of r runs, for the runs
// that reach minRuns at that rate; as many runs again for one never
// checked; none for availability unchecked (one node) or a property with
// an expected violation.
func TestRunsWanted(t *testing.T) {
	if got := runsWanted(map[propertytest.Property]int{"symmetry": 1, "exclusivity": 10}, nil, 10, true); got != 40 {
		t.Errorf("symmetry 1 in 10 runs: %d more wanted, want 40", got)
	}
	if got := runsWanted(map[propertytest.Property]int{"exclusivity": 10, "deadlock freedom": 10, "progress": 10}, nil, 10, true); got != 10 {
		t.Errorf("symmetry never checked in 10 runs: %d more wanted, want 10", got)
	}
	if got := runsWanted(map[propertytest.Property]int{"exclusivity": 10, "deadlock freedom": 10, "progress": 10}, nil, 10, false); got != 0 {
		t.Errorf("symmetry never checked in 10 runs on real servers: %d more wanted, want 0 (no guess)", got)
	}
	all := map[propertytest.Property]int{"symmetry": 6, "exclusivity": 6, "deadlock freedom": 6, "progress": 6}
	if got := runsWanted(all, nil, 6, true); got != 0 {
		t.Errorf("everything checked 6 times: %d more wanted, want 0", got)
	}
	all["symmetry"] = 0
	if got := runsWanted(all, map[propertytest.Property]int{"symmetry": 1}, 6, true); got != 0 {
		t.Errorf("symmetry expected: %d more wanted, want 0", got)
	}
}
