package propertytest

import (
	"errors"
	"fmt"
	"io"
	"strings"
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
// flag.CommandLine should parse them first (see rapid.go for why).
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
	restore, err := standaloneFlags(s)
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
