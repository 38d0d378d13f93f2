// Package fakeutil holds what every backend fake under fakes/ shares and
// no user needs: the test a fake was started for, the environment and
// option plumbing of the testing.TB helpers, and the lock options a fake
// hands out.
package fakeutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
)

// Owner is the test a fake was started for: set by the testing.TB helpers
// (redisfake.New, etcdfake.New, ...), nil for a fake from a Start function. A control that
// cannot go on (a member index out of range, Advance without manual time,
// Stop on a real server) fails the owner's test, or skips it where the
// environment chose a server the control cannot act on. Without a test
// there is nothing to fail: such a call is a programming error of the
// program, and it panics with the same message.
type Owner struct{ tb testing.TB }

// Own makes tb the fake's owner.
func (o *Owner) Own(tb testing.TB) { o.tb = tb }

// Helper marks the caller as a test helper, when there is a test.
func (o Owner) Helper() {
	if o.tb != nil {
		o.tb.Helper()
	}
}

// Fatalf fails the owner's test, or panics without one.
func (o Owner) Fatalf(format string, args ...any) {
	if o.tb == nil {
		panic(fmt.Sprintf(format, args...))
	}
	o.tb.Helper()
	o.tb.Fatalf(format, args...)
}

// Skipf skips the owner's test, or panics without one: a program asked
// for a control its server cannot give.
func (o Owner) Skipf(format string, args ...any) {
	if o.tb == nil {
		panic(fmt.Sprintf(format, args...))
	}
	o.tb.Helper()
	o.tb.Skipf(format, args...)
}

// ErrTooFewServers is wrapped by a Start function given fewer real servers
// than the cluster it was asked for. The testing.TB helpers skip the test
// on it when the servers came from the environment.
var ErrTooFewServers = errors.New("too few servers")

// WithEnv puts the server named by the environment variable env, if it is
// set, as an option made by at before opts (so that an option of the
// caller's wins). It returns the options, and whether the environment's
// server is the one they choose (picked reads the chosen server, as a
// comma-separated list, from the options).
func WithEnv[O any](env string, opts []O, at func(string) O, picked func([]O) string) ([]O, bool) {
	value := strings.Join(ListOf(os.Getenv(env)), ",")
	if value == "" {
		return opts, false
	}
	opts = append([]O{at(value)}, opts...)
	return opts, picked(opts) == value
}

// ApplyOptions applies opts, skipping nil ones, to c.
func ApplyOptions[C any, O ~func(*C)](c *C, opts []O) {
	for _, opt := range opts {
		if opt != nil {
			opt(c)
		}
	}
}

// ListOf splits a comma-separated list, trimming blanks and dropping empty
// items.
func ListOf(s string) []string {
	var items []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// ForTest is the body of every testing.TB helper: it reads the
// environment variable env into an option before opts (WithEnv), starts the
// fake with start, fails or skips t as StartFor does, closes the fake at
// t's cleanup and hands t to own, which makes it the fake's Owner.
func ForTest[S interface{ Close() error }, O any](t testing.TB, helper, env string, opts []O,
	at func(string) O, picked func([]O) string, start func(...O) (S, error), own func(S, testing.TB)) S {
	t.Helper()
	opts, usedEnv := WithEnv(env, opts, at, picked)
	s, err := start(opts...)
	if !StartFor(t, helper, env, usedEnv, err, s) {
		var none S
		return none
	}
	own(s, t)
	return s
}

// StartFor ends tb's part in starting a fake: it fails tb with err, naming
// the helper (as "redisfake.New") and, when the server came from the environment variable env,
// the variable and its value; or skips tb when err is errTooFewServers from
// the environment. Otherwise it registers the fake's Close at tb's
// cleanup. It reports whether the fake started.
func StartFor(tb testing.TB, helper, env string, usedEnv bool, err error, fake interface{ Close() error }) bool {
	tb.Helper()
	if err != nil {
		switch {
		case usedEnv && errors.Is(err, ErrTooFewServers):
			tb.Skipf("%s: %v (%s=%q)", helper, err, env, os.Getenv(env))
		case usedEnv:
			tb.Fatalf("%s: %s=%s: %v", helper, env, os.Getenv(env), err)
		default:
			tb.Fatalf("%s: %v", helper, err)
		}
		return false
	}
	tb.Cleanup(func() {
		if err := fake.Close(); err != nil {
			tb.Errorf("%s: cleanup: %v", helper, err)
		}
	})
	return true
}

// DialTCP dials addr over TCP.
func DialTCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// Target is where a fake's DialContext connects, whatever network and
// address its caller names: in memory on a server in process, over the
// network to the server's own address on a real one.
type Target struct {
	InMemory fakes.DialFunc // nil on a real server
	Net      string         // the real server's network ("" means "tcp")
	Addr     string         // the real server's address
}

// Dial connects to the target: through InMemory, given network and addr,
// when it is set; else over Net to Addr.
func (t Target) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if t.InMemory != nil {
		return t.InMemory(ctx, network, addr)
	}
	if t.Net == "" {
		return DialTCP(ctx, t.Addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, t.Net, t.Addr)
}

// ClockOf returns c, or locks.SystemClock when c is nil (real-time mode).
func ClockOf(c *fakes.Clock) locks.Clock {
	if c == nil {
		return locks.SystemClock{}
	}
	return c
}

// LockOptions returns the options under which a lock works on a fake: its
// key prefix and its clock (ClockOf(c)).
func LockOptions(prefix string, c *fakes.Clock) []locks.Option {
	return []locks.Option{locks.WithPrefix(prefix), locks.WithClock(ClockOf(c))}
}
