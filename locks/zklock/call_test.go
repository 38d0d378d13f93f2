package zklock

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// TestDoRunsOnTheCallerOnlyWhenNothingElseCanEndTheWait: a request with no
// bound on a ctx that cannot end runs on the caller's goroutine (do is on
// its stack), as nothing but the reply could end do's wait; a bounded one,
// or one whose ctx can end, runs on a goroutine of its own, so that do can
// return without it. Either way f's error comes back and late is called
// only for a call given up on.
func TestDoRunsOnTheCallerOnlyWhenNothingElseCanEndTheWait(t *testing.T) {
	opt, err := locks.Resolve(DefaultPrefix, locks.WithRequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l := &Locker{opt: opt}
	cancelled, cancel := context.WithCancel(context.Background())
	defer cancel()
	want := errors.New("reply")
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		bounded bool
		inline  bool
	}{
		{"unbounded, ctx cannot end", context.Background(), false, true},
		{"unbounded, ctx without cancel", context.WithoutCancel(cancelled), false, true},
		{"bounded", context.Background(), true, false},
		{"unbounded, ctx can end", cancelled, false, false},
	} {
		var onCaller bool
		lateCalled := false
		err := l.do(tc.ctx, "test", tc.bounded, func() error {
			buf := make([]byte, 1<<16)
			onCaller = strings.Contains(string(buf[:runtime.Stack(buf, false)]), "zklock.(*Locker).do(")
			return want
		}, func(error) { lateCalled = true })
		if !errors.Is(err, want) || onCaller != tc.inline || lateCalled {
			t.Errorf("%s: err %v, on the caller's goroutine %v (want %v), late called %v",
				tc.name, err, onCaller, tc.inline, lateCalled)
		}
	}
}
