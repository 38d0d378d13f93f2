// Package faketest holds the test helpers the fakes' tests share: gates
// that record or hold requests, and a testing.TB that records how a helper
// failed.
package faketest

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// fatalRecorder is a testing.TB whose Fatal, Fatalf and Skipf record the
// message (Skipf's prefixed "skip: ") and end the calling goroutine, so a
// test can check how a helper fails.
// Everything else goes to the real test.
type fatalRecorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *fatalRecorder) Skipf(format string, args ...any) {
	r.Fatalf("skip: "+format, args...)
}

func (r *fatalRecorder) Fatal(args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprint(args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// FatalMessage runs f in a goroutine of its own and returns the message it
// failed with; it fails t if f did not fail.
func FatalMessage(t *testing.T, f func(testing.TB)) string {
	t.Helper()
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(rec)
	}()
	<-done
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.msg == "" {
		t.Fatal("the helper did not fail the test")
	}
	return rec.msg
}
