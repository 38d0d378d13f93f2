package propertytest

import (
	"fmt"
	"io"
	"runtime"
	"sync"

	"pgregory.net/rapid"
)

// recordingTB is the rapid.TB of Check and RunStandalone: it records
// rapid's failures and logs instead of failing a test. It implements
// rapid's small interface and nothing of testing.TB: the factories get an
// Env of the run's own.
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

// skip records a skip and ends the calling goroutine, as testing's Skip
// does: rapid calls it only on the goroutine Check or RunStandalone
// started for it.
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
