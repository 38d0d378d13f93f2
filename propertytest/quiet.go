package propertytest

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// quietTB records failures and logs instead of failing a test. It is the
// rapid.TB of Check, and in RunStandalone both rapid's TB and the
// testing.TB the factories get, outside any test.
type quietTB struct {
	// TB is nil. It is embedded only for testing.TB's unexported method,
	// which nothing outside package testing can call; every exported
	// method is defined below.
	testing.TB

	name string
	log  io.Writer // a copy of every message as it comes; nil for none

	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	failed   bool
	skipped  bool
	msgs     []string
	failures []string // the messages of Errorf, Fatalf and the like
	cleanups []func()
}

var (
	_ rapid.TB   = (*quietTB)(nil)
	_ testing.TB = (*quietTB)(nil)
)

func newQuietTB(name string, log io.Writer) *quietTB {
	ctx, cancel := context.WithCancel(context.Background())
	return &quietTB{name: name, log: log, ctx: ctx, cancel: cancel}
}

func (q *quietTB) note(fail bool, s string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.failed = q.failed || fail
	if fail && s != "" {
		q.failures = append(q.failures, s)
	}
	if s != "" {
		q.msgs = append(q.msgs, s)
		if q.log != nil {
			fmt.Fprintln(q.log, s)
		}
	}
}

func (q *quietTB) skip(s string) {
	q.note(false, s)
	q.mu.Lock()
	q.skipped = true
	q.mu.Unlock()
	runtime.Goexit()
}

func (q *quietTB) Helper()                           {}
func (q *quietTB) Name() string                      { return q.name }
func (q *quietTB) Logf(format string, args ...any)   { q.note(false, fmt.Sprintf(format, args...)) }
func (q *quietTB) Log(args ...any)                   { q.note(false, fmt.Sprint(args...)) }
func (q *quietTB) Skipf(format string, args ...any)  { q.skip(fmt.Sprintf(format, args...)) }
func (q *quietTB) Skip(args ...any)                  { q.skip(fmt.Sprint(args...)) }
func (q *quietTB) SkipNow()                          { q.skip("") }
func (q *quietTB) Errorf(format string, args ...any) { q.note(true, fmt.Sprintf(format, args...)) }
func (q *quietTB) Error(args ...any)                 { q.note(true, fmt.Sprint(args...)) }
func (q *quietTB) Fatalf(format string, args ...any) {
	q.note(true, fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (q *quietTB) Fatal(args ...any) { q.note(true, fmt.Sprint(args...)); runtime.Goexit() }
func (q *quietTB) FailNow()          { q.note(true, ""); runtime.Goexit() }
func (q *quietTB) Fail()             { q.note(true, "") }
func (q *quietTB) Failed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.failed
}

func (q *quietTB) Skipped() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.skipped
}

// Cleanup registers f to run when the standalone run ends.
func (q *quietTB) Cleanup(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cleanups = append(q.cleanups, f)
}

// TempDir returns a new directory, removed when the run ends.
func (q *quietTB) TempDir() string {
	dir, err := os.MkdirTemp("", "lockproof-propertytest-")
	if err != nil {
		q.Fatalf("propertytest: TempDir: %v", err)
	}
	q.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// ArtifactDir is a TempDir: a standalone run keeps no artifacts.
func (q *quietTB) ArtifactDir() string { return q.TempDir() }

// Attr logs the attribute.
func (q *quietTB) Attr(key, value string) { q.Logf("attr %s=%s", key, value) }

// Setenv sets an environment variable until the run ends.
func (q *quietTB) Setenv(key, value string) {
	old, had := os.LookupEnv(key)
	if err := os.Setenv(key, value); err != nil {
		q.Fatalf("propertytest: Setenv(%q): %v", key, err)
	}
	q.Cleanup(func() {
		if had {
			_ = os.Setenv(key, old)
		} else {
			_ = os.Unsetenv(key)
		}
	})
}

// Chdir changes the working directory until the run ends.
func (q *quietTB) Chdir(dir string) {
	old, err := os.Getwd()
	if err == nil {
		err = os.Chdir(dir)
	}
	if err != nil {
		q.Fatalf("propertytest: Chdir(%q): %v", dir, err)
	}
	q.Cleanup(func() { _ = os.Chdir(old) })
}

// Context is cancelled when the run ends, before the clean-ups run.
func (q *quietTB) Context() context.Context { return q.ctx }

// Output is where the run's log goes.
func (q *quietTB) Output() io.Writer { return quietWriter{q} }

type quietWriter struct{ q *quietTB }

func (w quietWriter) Write(p []byte) (int, error) { w.q.note(false, string(p)); return len(p), nil }

// finish cancels the context and runs the clean-ups, last first.
func (q *quietTB) finish() {
	q.cancel()
	q.mu.Lock()
	fs := q.cleanups
	q.cleanups = nil
	q.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
