package propertytest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// outFlag is -propertytest.out: where the histories of failures are
// written.
var outFlag = flag.String("propertytest.out", "", "propertytest: directory for the JSON histories of failures, which lockproof history reads (default: the test's temporary directory)")

// EnvOut names the environment variable read when -propertytest.out is not
// given.
const EnvOut = "LOCKPROOF_PROPERTYTEST_OUT"

// Report is what a Run or Check found.
type Report struct {
	// Runs is the number of state-machine runs executed (rapid's test
	// cases, shrinking included).
	Runs int
	// Failed reports whether a property the lock claims was violated
	// (rapid then shrank the run and reported the seed).
	Failed bool
	// FirstFailure is the number of the run (1-based) that first violated
	// a claimed property; 0 if none did.
	FirstFailure int
	// Violations are those of the last violating run: after shrinking, the
	// minimal one rapid reports.
	Violations []Violation
	// Expected counts, per property, the runs with an expected violation
	// (under faults the lock does not claim to survive).
	Expected map[Property]int
	// ExpectedExample is the last expected violation seen.
	ExpectedExample *Violation
	// Checked counts, per property, the runs in which its check ran (the
	// symmetry probe needs a foreign call while another client holds the
	// lock; availability needs a Backend with nodes to stop).
	Checked map[Property]int
	// Undecided counts history checks that ran out of their time budget.
	Undecided int
	// Unclaimed lists, sorted, the fault kinds the runs could inject that
	// the lock does not claim (unclaimed Faults' kinds, and FaultPause if
	// not claimed); a violation under them is expected.
	Unclaimed []FaultKind
	// Outcomes counts, per kind of call ("Lock", "TryLock", "Unlock",
	// "Renew"), how the calls ended, the suite's probes included.
	Outcomes map[string]Outcomes
	// SpuriousRefusals counts the refusals of a free lock that were
	// tolerated (see Progress).
	SpuriousRefusals int
	// Output is what rapid reported for a failure in Check or
	// RunStandalone (seed, steps).
	Output string
	// Seed replays the failure: the -rapid.seed rapid printed for it
	// (Standalone.Seed in RunStandalone); 0 if none.
	Seed uint64
	// ShrinkCandidates is the number of candidates rapid's shrinker ran
	// (at most Options.ShrinkRuns), ShrinkTime the wall time it took. A
	// replay of Seed with ShrinkRuns set to ShrinkCandidates stops where
	// this run stopped, under any load.
	ShrinkCandidates int
	ShrinkTime       time.Duration
}

// Broken returns the violated properties of the last violating run that
// were not expected, in order.
func (r *Report) Broken() []Property {
	var ps []Property
	for _, v := range r.Violations {
		if !v.Expected {
			ps = append(ps, v.Property)
		}
	}
	return ps
}

// Run checks the lock built by factory with rapid state machines and fails
// t when a property it claims is violated, naming the property with the
// minimal history and its JSON file; rapid prints -rapid.seed to replay
// it, and -rapid.checks and -rapid.steps set the runs and their length.
// Violations under unclaimed faults are logged as expected. Run must be
// called from the test's goroutine.
func Run(t *testing.T, factory Factory, o Options) *Report {
	t.Helper()
	s, err := newSuite(t, factory, o)
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, s.prop)
	s.mu.Lock()
	s.noteShrink()
	s.mu.Unlock()
	s.logExpected(t)
	return s.report
}

// Check runs the same suite as Run but never fails t: it returns what it
// found, so a test can assert that a broken lock is caught.
func Check(t *testing.T, factory Factory, o Options) *Report {
	t.Helper()
	s, err := newSuite(t, factory, o)
	if err != nil {
		t.Fatal(err)
	}
	tb := newRecordingTB(t.Name(), nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rapid.Check(tb, s.prop)
	}()
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.Failed, s.report.Output = tb.failed, strings.Join(tb.msgs, "\n")
	s.report.Seed = seedIn(s.report.Output)
	s.noteShrink()
	s.logExpected(t)
	return s.report
}

// host is what a suite needs from what runs it: a test (Run, Check) or
// RunStandalone's recordingTB.
type host interface {
	Name() string
	Logf(format string, args ...any)
}

// suite is the state shared by the runs of one Run, Check or
// RunStandalone.
type suite struct {
	h       host
	factory Factory
	o       Options
	out     *outputs

	mu     sync.Mutex
	report *Report
	shrink shrinkBudget

	trace func(m *machine) // called at the end of every run; tests of the suite set it
}

func newSuite(h host, factory Factory, o Options) (*suite, error) {
	if factory == nil {
		return nil, fmt.Errorf("propertytest: nil factory")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	out := &outputs{name: h.Name(), dir: o.OutDir}
	if td, ok := h.(interface{ TempDir() string }); ok {
		out.tempDir = td.TempDir
	}
	return &suite{h: h, factory: factory, o: o, out: out,
		report: &Report{Expected: map[Property]int{}, Checked: map[Property]int{}, Outcomes: map[string]Outcomes{}}}, nil
}

// prop is one run: build the backend, run the actions, finish, check.
func (s *suite) prop(rt *rapid.T) {
	s.mu.Lock()
	call, spent := s.shrink.start(s.o.ShrinkRuns)
	s.mu.Unlock()
	if spent {
		rt.Skipf("propertytest: the shrink budget of %d runs is spent", s.o.ShrinkRuns)
	}
	defer func() {
		// Failed is true after rt.Fatalf, which ends the run with a panic
		// that runs this first.
		s.mu.Lock()
		s.shrink.end(call, rt.Failed())
		s.mu.Unlock()
	}()
	env := &runEnv{logf: s.h.Logf}
	defer env.cleanup()
	be, err := s.factory(env)
	if err == nil {
		err = be.validate()
	}
	if err != nil {
		rt.Fatalf("propertytest: factory: %v", err)
	}
	if be.Close != nil {
		defer be.Close()
	}
	// The clients' random delays (the jitter of their retries) come from
	// the run's seed too.
	m, err := newMachine(s.o, be, rapid.Uint64().Draw(rt, "jitter seed"))
	if err != nil {
		rt.Fatalf("%v", err)
	}
	m.sched.fail = func(err error) { rt.Fatalf("%v", err) } // a run the scheduler gave up on (see StuckLimit)
	// Heal what the run leaves struck after the crashes below, before
	// be.Close.
	defer m.healLeft(s.h.Logf)
	defer func() {
		for _, c := range append(m.cl, m.probe) {
			if c.op != nil {
				m.sched.crash(c.op)
			}
		}
	}()
	rt.Repeat(m.actions())
	if err := m.finish(); err != nil {
		rt.Fatalf("%v", err)
	}
	for _, n := range m.sched.takeNotes() {
		m.logf("scheduler: %s", n)
	}
	found, undecided, err := m.verdict(context.Background(), s.out)
	if err != nil {
		rt.Fatalf("%v", err)
	}
	if s.trace != nil {
		s.trace(m)
	}
	s.record(m, found, undecided)
	var failures []string
	for _, v := range found {
		if v.Expected {
			rt.Logf("%s", v)
			continue
		}
		failures = append(failures, v.String())
	}
	if len(failures) > 0 {
		rt.Logf("run log:\n  %s", strings.Join(m.log, "\n  "))
		n := len(failures)
		if s.out.temporary() {
			failures = append(failures, "(the histories are in the test's temporary directory, removed when the test ends: keep them with -propertytest.out=DIR or "+EnvOut+"=DIR)")
		}
		rt.Fatalf("propertytest: %s violated:\n%s", plural(n, "property", "properties"), strings.Join(failures, "\n\n"))
	}
}

func (s *suite) record(m *machine, found []Violation, undecided int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.Runs++
	for p := range m.findings.ran {
		s.report.Checked[p]++
	}
	for kind, o := range m.findings.outcomes {
		sum := s.report.Outcomes[kind]
		sum.OK, sum.Refused, sum.Failed, sum.Unknown = sum.OK+o.OK, sum.Refused+o.Refused, sum.Failed+o.Failed, sum.Unknown+o.Unknown
		s.report.Outcomes[kind] = sum
	}
	s.report.SpuriousRefusals += m.findings.spurious
	kinds := []FaultKind{}
	if !m.o.claims(FaultPause) {
		kinds = append(kinds, FaultPause)
	}
	for _, f := range m.be.Faults {
		if !m.o.claims(f.Kind) {
			kinds = append(kinds, f.Kind)
		}
	}
	for _, k := range kinds {
		if !slices.Contains(s.report.Unclaimed, k) {
			s.report.Unclaimed = append(s.report.Unclaimed, k)
		}
	}
	slices.Sort(s.report.Unclaimed)
	s.report.Undecided += undecided
	seen := map[Property]bool{}
	broken := false
	for i, v := range found {
		if v.Expected && !seen[v.Property] {
			seen[v.Property] = true
			s.report.Expected[v.Property]++
			s.report.ExpectedExample = &found[i]
		}
		broken = broken || !v.Expected
	}
	if broken {
		if s.report.FirstFailure == 0 {
			s.report.FirstFailure = s.report.Runs
		}
		s.report.Violations = found
	}
}

func (s *suite) logExpected(t interface{ Logf(string, ...any) }) {
	for p, n := range s.report.Expected {
		t.Logf("propertytest: %s: expected violation in %d of %d runs (faults the lock does not claim)", p, n, s.report.Runs)
	}
	if s.report.Undecided > 0 {
		t.Logf("propertytest: %d history checks undecided (Options.CheckSteps or CheckTimeLimit spent)", s.report.Undecided)
	}
	var calls []string
	for _, kind := range outcomeKinds {
		if o, ok := s.report.Outcomes[kind]; ok {
			calls = append(calls, kind+": "+o.String())
		}
	}
	if len(calls) > 0 {
		t.Logf("propertytest: calls over %d runs: %s; %d spurious refusals", s.report.Runs, strings.Join(calls, "; "), s.report.SpuriousRefusals)
	}
}

// outputs writes violations' evidence as JSON, one file per test and
// property, overwritten so rapid's last (minimal) run stays.
type outputs struct {
	name string // the test's or the standalone run's
	dir  string
	// tempDir is the test's TempDir; nil (RunStandalone) writes nothing
	// without a dir.
	tempDir func() string

	mu   sync.Mutex
	temp bool // dir is the test's temporary directory
}

// temporary reports whether the histories went to the test's temporary
// directory.
func (o *outputs) temporary() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.temp
}

// plural renders n and the noun for it.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// write writes e, the nth violation of p in the run, as JSON to a file
// and returns its path, or a note of why it could not; "" when it has
// nowhere to write.
func (o *outputs) write(p Property, nth int, e *Evidence) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dir == "" && o.tempDir == nil {
		return ""
	}
	if o.dir == "" {
		switch {
		case *outFlag != "":
			o.dir = *outFlag
		case os.Getenv(EnvOut) != "":
			o.dir = os.Getenv(EnvOut)
		default:
			o.dir, o.temp = o.tempDir(), true
		}
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return "(history not written: " + err.Error() + ")"
	}
	base := o.name + "-" + string(p)
	if nth > 1 {
		base += fmt.Sprintf("-%d", nth)
	}
	name := unsafeName.ReplaceAllString(base, "_") + ".json"
	path := filepath.Join(o.dir, name)
	f, err := os.Create(path)
	if err != nil {
		return "(history not written: " + err.Error() + ")"
	}
	err = e.WriteJSON(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "(history not written: " + err.Error() + ")"
	}
	return path
}

// runEnv is the Env a Factory gets: clean-ups registered with Cleanup run
// at the end of the run, and Logf goes to the host's log.
type runEnv struct {
	logf func(format string, args ...any)

	mu       sync.Mutex
	cleanups []func()
}

// Cleanup registers f to run at the end of the run.
func (r *runEnv) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// Logf adds a line to the host's log.
func (r *runEnv) Logf(format string, args ...any) { r.logf(format, args...) }

// cleanup runs the registered clean-ups, last registered first.
func (r *runEnv) cleanup() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
