package propertytest

// Everything here bridges pgregory.net/rapid v1.3, whose state machines
// take their settings from process-wide flags and report through a
// testing-like TB; each piece says what it works around, and each may go
// when rapid offers the same through its API.
//
//   - recordingTB: rapid.Check fails the TB it is given; Check and
//     RunStandalone need a verdict without failing a test.
//   - shrinkBudget: rapid bounds shrinking by wall time only
//     (-rapid.shrinktime), so a replay on a slower machine stops elsewhere;
//     the budget counts candidates (Options.ShrinkRuns) instead.
//   - seedIn: rapid returns no seed; it prints one (-rapid.seed=N) in its
//     failure message, which seedIn reads back for Report.Seed.
//   - standaloneFlags and setRapidFlags: rapid.Check and T.Repeat call
//     testing.Short, which panics before testing.Init, and read the seed,
//     checks, shrink time and steps only from flags; so RunStandalone
//     calls testing.Init and sets the flags for its duration.

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// recordingTB is the rapid.TB of Check and RunStandalone: it records
// rapid's failures and logs instead of failing a test.
type recordingTB struct {
	name string
	log  io.Writer // a copy of every message as it comes; nil for none

	mu       sync.Mutex
	failed   bool
	skipped  bool
	msgs     []string
	failures []string // the messages of Errorf, Fatalf and the like
}

var _ rapid.TB = (*recordingTB)(nil)

func newRecordingTB(name string, log io.Writer) *recordingTB {
	return &recordingTB{name: name, log: log}
}

func (r *recordingTB) note(fail bool, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = r.failed || fail
	if fail && s != "" {
		r.failures = append(r.failures, s)
	}
	if s != "" {
		r.msgs = append(r.msgs, s)
		if r.log != nil {
			fmt.Fprintln(r.log, s)
		}
	}
}

// skip records a skip and ends the calling goroutine, as testing's Skip.
func (r *recordingTB) skip(s string) {
	r.note(false, s)
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recordingTB) Helper()                           {}
func (r *recordingTB) Name() string                      { return r.name }
func (r *recordingTB) Logf(format string, args ...any)   { r.note(false, fmt.Sprintf(format, args...)) }
func (r *recordingTB) Log(args ...any)                   { r.note(false, fmt.Sprint(args...)) }
func (r *recordingTB) Skipf(format string, args ...any)  { r.skip(fmt.Sprintf(format, args...)) }
func (r *recordingTB) Skip(args ...any)                  { r.skip(fmt.Sprint(args...)) }
func (r *recordingTB) SkipNow()                          { r.skip("") }
func (r *recordingTB) Errorf(format string, args ...any) { r.note(true, fmt.Sprintf(format, args...)) }
func (r *recordingTB) Error(args ...any)                 { r.note(true, fmt.Sprint(args...)) }
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.note(true, fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recordingTB) Fatal(args ...any) { r.note(true, fmt.Sprint(args...)); runtime.Goexit() }
func (r *recordingTB) FailNow()          { r.note(true, ""); runtime.Goexit() }
func (r *recordingTB) Fail()             { r.note(true, "") }

func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recordingTB) Skipped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}

// shrinkBudget counts the runs rapid makes to shrink a failure, to refuse
// its candidates once Options.ShrinkRuns are spent. It follows rapid
// v1.3's order of calls: the search until a run fails; one run that
// reproduces it; the shrinker's candidates, each failing one run again at
// once (never refused); a last run of the smallest case, which falls under
// the budget like a candidate (refused, its log is missing from rapid's
// output, but the violation is kept).
type shrinkBudget struct {
	phase    shrinkPhase
	again    bool      // the next call is the second run of a failing candidate
	failedAt time.Time // when the first failing run ended
	ran      int       // candidate runs let through
	lastRan  bool      // the latest call was a candidate let through
}

type shrinkPhase int

const (
	searching   shrinkPhase = iota // no run has failed yet
	reproducing                    // the next run reproduces the first failure
	shrinking                      // rapid's shrinker is at work
)

// shrinkCall is what a call is, as start found it.
type shrinkCall int

const (
	searchRun shrinkCall = iota
	reproduceRun
	candidateRun
	secondRun
)

// start classifies the next call and reports whether the budget of limit
// candidates is spent (never when limit < 0).
func (b *shrinkBudget) start(limit int) (shrinkCall, bool) {
	b.lastRan = false
	switch {
	case b.phase == searching:
		return searchRun, false
	case b.phase == reproducing:
		return reproduceRun, false
	case b.again:
		b.again = false
		return secondRun, false
	}
	spent := limit >= 0 && b.ran >= limit
	if !spent {
		b.ran++
		b.lastRan = true
	}
	return candidateRun, spent
}

// tried is the number of candidates the shrinker ran: the candidate runs
// let through, less rapid's last run of the smallest case, which start
// counts as one (the latest call, when it was let through).
func (b *shrinkBudget) tried() int {
	if b.lastRan {
		return b.ran - 1
	}
	return b.ran
}

// noteShrink copies what the shrink budget saw into the report; s.mu is
// held.
func (s *suite) noteShrink() {
	s.report.ShrinkTime, s.report.ShrinkCandidates = s.shrink.elapsed(), s.shrink.tried()
}

// elapsed is the wall time since the first failing run ended; zero
// before one did.
func (b *shrinkBudget) elapsed() time.Duration {
	if b.failedAt.IsZero() {
		return 0
	}
	return time.Since(b.failedAt)
}

// end records how the call ended.
func (b *shrinkBudget) end(call shrinkCall, failed bool) {
	if !failed {
		return
	}
	switch call {
	case searchRun:
		b.phase, b.failedAt = reproducing, time.Now()
	case reproduceRun:
		b.phase = shrinking
	case candidateRun:
		b.again = true
	}
}

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

// standaloneMu serializes RunStandalone: rapid's settings are
// process-wide flags.
var standaloneMu sync.Mutex

// standaloneFlags prepares rapid to run outside go test with the settings
// of s and returns what puts the flags back; standaloneMu is held.
func standaloneFlags(s Standalone) (func(), error) {
	testing.Init()
	if !flag.Parsed() {
		if err := flag.CommandLine.Parse(nil); err != nil {
			return nil, err
		}
	}
	return setRapidFlags(map[string]string{
		"rapid.checks":     strconv.Itoa(s.Checks),
		"rapid.seed":       strconv.FormatUint(s.Seed, 10),
		"rapid.steps":      strconv.Itoa(s.Steps),
		"rapid.shrinktime": s.ShrinkTime.String(),
		"rapid.nofailfile": "true",
		"rapid.failfile":   "",
	})
}
