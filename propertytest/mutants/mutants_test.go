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
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

var (
	searchSeeds = flag.Int("mutants.seeds", 0, "mutants: besides its corpus seed, search for every mutant from this many random seeds (LOCKPROOF_DEEP=1: 10)")
	twinChecks  = flag.Int("mutants.twinchecks", 0, "mutants: runs every bug-free twin must pass (default 2; LOCKPROOF_DEEP=1: 100)")
	realTime    = flag.Bool("mutants.realtime", false, "mutants: also run the mutants on backends in real time (the embedded etcd; on by LOCKPROOF_DEEP=1)")
)

// realTimeRuns reports whether the mutants on backends in real time run:
// their runs take seconds each (the etcd one took 90 s of the default
// go test's two minutes), so go test ./... leaves them out unless asked,
// and CI asks (.ci/run, step 2).
func realTimeRuns() bool { return *realTime || deep() }

// killChecks is the number of runs a mutant is given to be caught from a
// random seed, or from its corpus seed when that seed no longer replays;
// rapid stops at the first run that catches it.
const killChecks = 300

// deepKillChecks is killChecks for a random seed under LOCKPROOF_DEEP,
// which searches the tail: semaphore-renewal-resurrects survived 300 runs
// from one seed in 340 (8381441008991956091) and was caught at run 532,
// in 20 s.
const deepKillChecks = 1000

// realTimeChecks is killChecks for a mutant on a backend in real time
// (Mutant.RealTime), whose runs take seconds each.
const realTimeChecks = 40

// deepSeeds is how many random seeds each mutant must be caught from
// under LOCKPROOF_DEEP=1.
const deepSeeds = 10

// caught is a corpus entry: seeds whose first run catches a mutant, and
// the property that run names first.
type caught struct {
	seeds  []uint64
	breaks propertytest.Property
}

// corpus holds, for every mutant, a seed whose first run catches it (each
// found by the random search, -mutants.seeds, and printed by the test that
// caught it). On a backend in manual time the seed fixes the run, so the
// default go test catches every mutant in one run each, not the tens to
// hundreds of runs a random seed may need; where a run does not replay
// exactly (see inexact) the test goes on searching from the seed, so the
// mutant is still caught, later, and the log says so.
//
// On the embedded etcd, which keeps real time, a seed replays only when
// the timing does too (under load average 20: the first seed below caught
// the mutant in 3 of 5 tries, the second and third in 1 of 1 each, a
// fourth in 0 of 1): such a mutant has several seeds, each given one run,
// in order, and if none catches it a random search of realTimeChecks runs
// follows, as with -mutants.seeds.
//
// A mutant without an entry fails the test, which says how to find one.
var corpus = map[string]caught{
	"consul-ignores-session-invalidation": {[]uint64{8340089690135718629}, propertytest.Symmetry},
	"deadline-from-reply":                 {[]uint64{3259643969068155548}, propertytest.Exclusivity},
	"done-waits-for-server":               {[]uint64{7736331520782523494}, propertytest.Exclusivity},
	"etcd-waiter-without-recheck":         {[]uint64{5682770300691929147, 4001004265697365976, 3675513620194149176}, propertytest.Exclusivity},
	"expired-takeover-get-then-set":       {[]uint64{5231255210038478224}, propertytest.Exclusivity},
	"fair-queue-entry-left":               {[]uint64{1380493699672806672}, propertytest.DeadlockFreedom},
	"fence-does-not-grow":                 {[]uint64{2390974802083726706}, propertytest.Exclusivity},
	"grant-without-check":                 {[]uint64{8141647415847030944}, propertytest.Exclusivity},
	"mysql-takeover-without-expiry-check": {[]uint64{5329306380482885317}, propertytest.Exclusivity},
	"no-expiry":                           {[]uint64{4403359881292900608}, propertytest.DeadlockFreedom},
	"no-renewal-while-work-outlasts-ttl":  {[]uint64{4910596392742150886}, propertytest.Exclusivity},
	"redis-without-fencing-under-pause":   {[]uint64{2747651238447918098}, propertytest.Exclusivity},
	"redlock-accepts-minority":            {[]uint64{7409859520492000441}, propertytest.Exclusivity},
	"reentry-resets-ttl":                  {[]uint64{3091242139856975993}, propertytest.Exclusivity},
	"reentry-unlock-ignores-count":        {[]uint64{5194738557967952940}, propertytest.Exclusivity},
	"refused-attempt-node-left":           {[]uint64{4569678360617607850}, propertytest.DeadlockFreedom},
	"renew-extends-any-owner":             {[]uint64{3593424038292061596}, propertytest.Symmetry},
	"renew-ignores-refusal":               {[]uint64{4291168989933584859}, propertytest.Symmetry},
	"renew-sets-without-owner-check":      {[]uint64{4104992481572910020}, propertytest.Exclusivity},
	"renewal-failure-only-logged":         {[]uint64{4569114836350967742}, propertytest.Exclusivity},
	"rw-read-unlock-deletes-lock":         {[]uint64{8528189712747305628}, propertytest.Symmetry},
	"rw-reader-check-then-join":           {[]uint64{6931691631583891288}, propertytest.Exclusivity},
	"rw-reader-renewal-misses-its-lease":  {[]uint64{4381855338987517051}, propertytest.Exclusivity},
	"semaphore-count-then-add":            {[]uint64{6146444869205200016}, propertytest.Exclusivity},
	"semaphore-permits-never-expire":      {[]uint64{1223646750528316268}, propertytest.DeadlockFreedom},
	"semaphore-renewal-resurrects":        {[]uint64{7911106869313439585}, propertytest.Exclusivity},
	"setnx-then-expire":                   {[]uint64{8057794969776224299}, propertytest.DeadlockFreedom},
	"shared-fencing-token":                {[]uint64{5322481025239374323}, propertytest.Exclusivity},
	"single-node-posing-as-three":         {[]uint64{7486890497311277740}, propertytest.Availability},
	"unlock-get-then-del":                 {[]uint64{1880374689376217009}, propertytest.Symmetry},
	"unlock-without-owner-check":          {[]uint64{5558925502369170829}, propertytest.Symmetry},
	"validity-adds-drift":                 {[]uint64{6271903164352644990}, propertytest.Exclusivity},
	"zk-cancelled-waiter-node-left":       {[]uint64{7839032527086512223}, propertytest.DeadlockFreedom},
	"zk-renew-checks-session-only":        {[]uint64{892250091754521683}, propertytest.Symmetry},
	"zk-waiter-without-recheck":           {[]uint64{8756574162658943689}, propertytest.Exclusivity},
}

// Every registered mutant, backends' own included, is caught: the suite
// fails it (a claimed property, not an expected violation) and names the
// property it was built to break first, with the seed that replays it.
//
// By default each mutant runs from its corpus seed only, and the run that
// catches it is not minimized (-rapid.shrinktime=0 unless given): rapid
// minimizes a block of the run (the clients' 64-bit jitter seed) to the
// end even past its deadline, up to 250 runs, which cost more than all the
// rest of the corpus. The search from random seeds, which finds what the
// corpus does not know yet, runs with -mutants.seeds=N (CI: 1) or
// LOCKPROOF_DEEP=1 (10 seeds each), and minimizes as before: a random seed
// may need hundreds of runs (redlock-accepts-minority took 29 s,
// zk-renew-checks-session-only 32 s) and the mutant on the embedded etcd,
// 6-20 s a run in real time, took 4 min from one seed.
func TestEveryMutantIsCaught(t *testing.T) {
	seeds := *searchSeeds
	if deep() && seeds == 0 {
		seeds = deepSeeds
	}
	for _, m := range All() {
		t.Run(m.Name, func(t *testing.T) {
			if m.RealTime && !realTimeRuns() {
				t.Skipf("%s runs on a backend in real time, seconds a run: run it with -mutants.realtime or LOCKPROOF_DEEP=1", m.Name)
			}
			if c, ok := corpus[m.Name]; ok {
				t.Run("corpus", func(t *testing.T) { assertCaughtByCorpus(t, m, c) })
			} else {
				t.Errorf("mutant %s has no corpus seed: find one with -run '^%s$' -mutants.seeds=1 and add it", m.Name, t.Name())
			}
			for i := range seeds {
				t.Run(fmt.Sprintf("seed-%d", i), func(t *testing.T) {
					checks := killChecks
					switch {
					case m.RealTime:
						checks = realTimeChecks
					case deep():
						checks = deepKillChecks
					}
					useRapid(t, 0, checks)
					assertCaught(t, m, propertytest.Check(t, m.Factory, m.Options))
				})
			}
		})
	}
}

// assertCaughtByCorpus runs the suite on m from c's seeds, unminimized:
// from the first seed with killChecks runs on a backend in manual time,
// else one run from each seed in turn until one catches m, then a random
// search.
func assertCaughtByCorpus(t *testing.T, m Mutant, c caught) {
	if !shrinkGiven {
		suitemain.SetFlag(t, "rapid.shrinktime", "0s")
	}
	if seedGiven || !m.RealTime {
		useRapid(t, c.seeds[0], killChecks)
		rep := assertCaught(t, m, propertytest.Check(t, m.Factory, m.Options))
		if !seedGiven {
			checkCorpusReplay(t, m, c.seeds[0], c.breaks, rep)
		}
		return
	}
	for _, seed := range c.seeds {
		useRapid(t, seed, 1)
		if rep := propertytest.Check(t, m.Factory, m.Options); rep.Failed {
			assertCaught(t, m, rep)
			return
		}
		t.Logf("seed %d did not catch %s in its run (real time: its timing differs from the run it was found in)", seed, m.Name)
	}
	useRapid(t, 0, realTimeChecks)
	assertCaught(t, m, propertytest.Check(t, m.Factory, m.Options))
}

// assertCaught checks what a run of the suite on m reported: m caught, its
// property named, the seed printed, a history and a timeline shown. It
// returns rep.
func assertCaught(t *testing.T, m Mutant, rep *propertytest.Report) *propertytest.Report {
	t.Helper()
	if !rep.Failed {
		t.Fatalf("mutant %s survived %d runs (%s)\nexpected violations: %v\n%s", m.Name, rep.Runs, m.Bug, rep.Expected, rep.Output)
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
	t.Logf("killed %s: %s at run %d (%d runs with shrinking); replay the failure: -rapid.seed=%d\n%s",
		m.Name, broken[0], rep.FirstFailure, rep.Runs, rep.Seed, v.Detail)
	return rep
}

// checkCorpusReplay compares a run from a corpus seed with what the corpus
// says: caught in the seed's own run, breaks named first. A mutant whose
// runs replay exactly must agree; for the others (see inexact) it is
// noted, as the search went on from the seed.
func checkCorpusReplay(t *testing.T, m Mutant, seed uint64, breaks propertytest.Property, rep *propertytest.Report) {
	t.Helper()
	named := rep.Broken()[0]
	if rep.FirstFailure == 1 && named == breaks {
		return
	}
	msg := fmt.Sprintf("corpus seed %d of %s: caught at run %d naming %s first; the corpus says run 1, %s",
		seed, m.Name, rep.FirstFailure, named, breaks)
	if !slices.Contains(inexact, m.Name) {
		t.Errorf("%s: its runs replay exactly, so the suite or the mutant changed: if on purpose, put seed %d (%s) in the corpus", msg, rep.Seed, named)
		return
	}
	t.Logf("%s (its backend does not replay a seed exactly)", msg)
}

// inexact are the mutants in manual time whose runs a seed does not fix
// exactly, for the reasons propertytest's replay_test.go gives for their
// backends: miniconsul's session timers, go-mysql-server (not traced
// yet), several miniredis nodes with some stopped (Redlock; not traced
// yet) and minizk
// (go-zookeeper reconnects on the wall clock). The corpus seeds of the
// others (miniredis, MemLock and this package's in-memory servers) must
// catch their mutant in their first run.
var inexact = []string{
	"consul-ignores-session-invalidation",
	"mysql-takeover-without-expiry-check",
	"redlock-accepts-minority",
	"single-node-posing-as-three",
	"zk-cancelled-waiter-node-left",
	"zk-renew-checks-session-only",
	"zk-waiter-without-recheck",
}

// The same locks on the same backends without their bug pass, with the
// mutants' own Options: a mutant is caught for its bug, not for the
// harness or the backend. A run costs up to 1.5 s (the Redlock twin on five
// nodes), and 8 runs each took 47-59 s together, most of the default
// budget of go test ./...: by default each twin passes 2 runs;
// -mutants.twinchecks=N sets the number (CI: 8, the default until then),
// LOCKPROOF_DEEP=1 makes it 100.
func TestFixedTwinsPass(t *testing.T) {
	checks := 2
	switch {
	case *twinChecks > 0:
		checks = *twinChecks
	case deep():
		checks = 100
	}
	for _, m := range All() {
		t.Run(m.Name, func(t *testing.T) {
			if m.Fixed == nil {
				t.Skipf("mutant %s has no bug-free twin", m.Name)
			}
			useRapid(t, 0, checks)
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

// The bug-free twin of no-renewal-while-work-outlasts-ttl hands out leases
// without a token but reports its inner redislock's events, fenced. A
// TryLock held up past its lease's validity gave its grant back and
// reported token 6, and the history recorded that grant with token 6
// among grants it numbered itself (65536, 131072, …): "a fencing token
// that did not grow", on a correct lock (LOCKPROOF_DEEP, 1 of 100 runs of
// a random seed). A grant given back keeps the lock's token only once a
// returned lease showed that the leases are fenced; otherwise it is of
// unknown outcome.
func TestGivenBackGrantOfAnUnfencedLockIsNoViolation(t *testing.T) {
	m, err := Lookup("no-renewal-while-work-outlasts-ttl")
	if err != nil || m.Fixed == nil {
		t.Fatalf("no bug-free twin of no-renewal-while-work-outlasts-ttl: %v", err)
	}
	useRapid(t, 4606020620369841063, 1)
	if rep := propertytest.Check(t, m.Fixed, m.Options); rep.Failed {
		t.Fatalf("the bug-free twin was flagged: %v\n%s", rep.Broken(), rep.Output)
	}
}
