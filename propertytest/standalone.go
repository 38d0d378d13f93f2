package propertytest

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Standalone holds what RunStandalone needs in place of a test: a name and
// the settings rapid otherwise reads from its -rapid.* flags.
type Standalone struct {
	// Name names the run: it is rapid's test name and prefixes the
	// history files. Required.
	Name string
	// Checks is the number of runs (rapid's -rapid.checks). Default 100.
	Checks int
	// Seed is rapid's -rapid.seed: the seed of the first run (each later
	// run adds to it). 0 lets rapid pick one at random.
	Seed uint64
	// Steps is the average number of actions per run (-rapid.steps).
	// Default 30.
	Steps int
	// ShrinkTime bounds the minimization of a failing run
	// (-rapid.shrinktime). Default 10s.
	ShrinkTime time.Duration
	// Log receives rapid's and the suite's log lines as they come; nil
	// discards them (Report.Output keeps them).
	Log io.Writer

	_ struct{} // keyed literals only
}

// ErrNoVerdict is returned by RunStandalone when the suite could not judge
// the lock: the factory failed, the backend was skipped, or a run broke
// down without any property being violated.
var ErrNoVerdict = errors.New("propertytest: no verdict")

// standaloneMu serializes RunStandalone: rapid's settings are
// process-wide flags.
var standaloneMu sync.Mutex

// seedFlag matches the seed rapid prints to replay a failure.
var seedFlag = regexp.MustCompile(`-rapid\.seed=(\d+)`)

// seedIn returns the replay seed in rapid's output, or 0.
func seedIn(out string) uint64 {
	m := seedFlag.FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// RunStandalone runs the suite outside `go test`, as lockproof check does:
// Checks runs of the rapid state machine over the lock factory builds,
// with the Options of Run. It returns what it found, as Check does: a
// violated claim is Report.Failed with the minimal run's Violations and
// the Seed that replays it (RunStandalone with that Seed and Checks 1).
//
// Factories get an Env of the run's own, as in Run: Cleanup is scoped to
// the state machine run, Logf goes to Log and Report.Output; a factory's
// error ends the run. The error is ErrNoVerdict (wrapped, with what went
// wrong) when the suite could not judge the lock; any other error is bad
// input.
//
// rapid keeps its settings in process-wide flags: RunStandalone sets them
// for its duration and restores them, and calls are serialized. It parses
// the (empty) command line of package flag if nothing has, because rapid
// asks testing.Short, which needs it; a program with flags of its own on
// flag.CommandLine should parse them first.
//
// Why not through rapid's API alone (read in pgregory.net/rapid v1.3.0):
// rapid.Check and T.Repeat, which runs the state machine, both call
// testing.Short, which panics unless testing.Init has run ("testing: Short
// called before Init"); Check reads the seed, the number of checks and the
// shrink time only from its flags (baseSeed reads flags.seed) and Repeat
// the steps; Generator.Example(seed) fixes a seed without the flags but
// does not shrink and still reaches Repeat. So testing.Init and the flags
// stay until rapid takes its settings from its caller.
func RunStandalone(factory Factory, o Options, s Standalone) (*Report, error) {
	if s.Name == "" {
		return nil, fmt.Errorf("propertytest: RunStandalone needs a Name")
	}
	if s.Checks < 0 || s.Steps < 0 || s.ShrinkTime < 0 {
		return nil, fmt.Errorf("propertytest: negative Checks, Steps or ShrinkTime")
	}
	if s.Checks == 0 {
		s.Checks = 100
	}
	if s.Steps == 0 {
		s.Steps = 30
	}
	if s.ShrinkTime == 0 {
		s.ShrinkTime = 10 * time.Second
	}
	standaloneMu.Lock()
	defer standaloneMu.Unlock()
	testing.Init()
	if !flag.Parsed() {
		if err := flag.CommandLine.Parse(nil); err != nil {
			return nil, err
		}
	}
	restore, err := setRapidFlags(map[string]string{
		"rapid.checks":     strconv.Itoa(s.Checks),
		"rapid.seed":       strconv.FormatUint(s.Seed, 10),
		"rapid.steps":      strconv.Itoa(s.Steps),
		"rapid.shrinktime": s.ShrinkTime.String(),
		"rapid.nofailfile": "true",
		"rapid.failfile":   "",
	})
	if err != nil {
		return nil, err
	}
	defer restore()

	tb := newRecordingTB(s.Name, s.Log)
	suite, err := newSuite(tb, factory, o)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rapid.Check(tb, suite.prop)
	}()
	<-done

	suite.mu.Lock()
	defer suite.mu.Unlock()
	rep := suite.report
	rep.Failed, rep.Output = tb.Failed(), strings.Join(tb.msgs, "\n")
	rep.Seed = seedIn(rep.Output)
	suite.noteShrink()
	switch {
	case tb.Skipped():
		return rep, fmt.Errorf("%w: skipped: %s", ErrNoVerdict, lastLine(tb.msgs))
	case rep.Failed && len(rep.Broken()) == 0:
		return rep, fmt.Errorf("%w: %s", ErrNoVerdict, firstFailure(rep.Output, tb.failures))
	}
	return rep, nil
}

// setRapidFlags sets rapid's flags and returns what puts them back.
func setRapidFlags(values map[string]string) (func(), error) {
	old := map[string]string{}
	restore := func() {
		for name, v := range old {
			_ = flag.Set(name, v)
		}
	}
	for name, v := range values {
		f := flag.Lookup(name)
		if f == nil {
			restore()
			return nil, fmt.Errorf("propertytest: rapid has no flag -%s", name)
		}
		old[name] = f.Value.String()
		if err := f.Value.Set(v); err != nil {
			restore()
			return nil, fmt.Errorf("propertytest: -%s=%s: %w", name, v, err)
		}
	}
	return restore, nil
}

func lastLine(msgs []string) string {
	if len(msgs) == 0 {
		return "(no reason given)"
	}
	return msgs[len(msgs)-1]
}

// firstFailure picks the line of rapid's output that says what failed:
// the suite's or rapid's verdict, else the first line of the first of the
// failures (a factory's Fatalf: a server that did not answer, say).
func firstFailure(out string, failures []string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "propertytest:") || strings.Contains(line, "[rapid] failed") ||
			strings.Contains(line, "[rapid] panic") || strings.Contains(line, "only generated") {
			return strings.TrimSpace(line)
		}
	}
	for _, msg := range failures {
		if line := strings.TrimSpace(strings.SplitN(msg, "\n", 2)[0]); line != "" {
			return line
		}
	}
	return "the run failed without a violation"
}
