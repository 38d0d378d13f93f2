package fakeutil

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// owner is the test a fake was started for: set by the testing.TB helpers
// (Redis, Etcd, ...), nil for a fake from a Start function. A control that
// cannot go on (a member index out of range, Advance without manual time,
// Stop on a real server) fails the owner's test, or skips it where the
// environment chose a server the control cannot act on. Without a test
// there is nothing to fail: such a call is a programming error of the
// program, and it panics with the same message.
type owner struct{ tb testing.TB }

// own makes tb the fake's owner.
func (o *owner) own(tb testing.TB) { o.tb = tb }

// helper marks the caller as a test helper, when there is a test.
func (o owner) helper() {
	if o.tb != nil {
		o.tb.Helper()
	}
}

// fatalf fails the owner's test, or panics without one.
func (o owner) fatalf(format string, args ...any) {
	if o.tb == nil {
		panic(fmt.Sprintf(format, args...))
	}
	o.tb.Helper()
	o.tb.Fatalf(format, args...)
}

// skipf skips the owner's test, or panics without one: a program asked
// for a control its server cannot give.
func (o owner) skipf(format string, args ...any) {
	if o.tb == nil {
		panic(fmt.Sprintf(format, args...))
	}
	o.tb.Helper()
	o.tb.Skipf(format, args...)
}

// errTooFewServers is wrapped by a Start function given fewer real servers
// than the cluster it was asked for. The testing.TB helpers skip the test
// on it when the servers came from the environment.
var errTooFewServers = errors.New("too few servers")

// ErrNoHolder is wrapped by the error of an ExpireLock (RedisServer's,
// RedisNodes', EtcdServer's, ConsulServer's, MySQLServer's and
// ZooKeeperServer's) when nobody holds the lock, so there is no lease to
// end: a caller that expires "the holder, if any" can tell it from a
// failure with errors.Is.
var ErrNoHolder = errors.New("nobody holds the lock")

// withEnv puts the server named by the environment variable env, if it is
// set, as an option made by at before opts (so that an option of the
// caller's wins). It returns the options, and whether the environment's
// server is the one they choose (picked reads the chosen server, as a
// comma-separated list, from the options).
func withEnv[O any](env string, opts []O, at func(string) O, picked func([]O) string) ([]O, bool) {
	value := strings.Join(listOf(os.Getenv(env)), ",")
	if value == "" {
		return opts, false
	}
	opts = append([]O{at(value)}, opts...)
	return opts, picked(opts) == value
}

// applyOptions applies opts, skipping nil ones, to c.
func applyOptions[C any, O ~func(*C)](c *C, opts []O) {
	for _, opt := range opts {
		if opt != nil {
			opt(c)
		}
	}
}

// listOf splits a comma-separated list, trimming blanks and dropping empty
// items.
func listOf(s string) []string {
	var items []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// forTest is the body of every testing.TB helper: it reads the
// environment variable env into an option before opts (withEnv), starts the
// fake with start, fails or skips t as startFor does, closes the fake at
// t's cleanup and makes t its owner.
func forTest[S interface {
	Close() error
	own(testing.TB)
}, O any](t testing.TB, helper, env string, opts []O, at func(string) O, picked func([]O) string,
	start func(...O) (S, error)) S {
	t.Helper()
	opts, usedEnv := withEnv(env, opts, at, picked)
	s, err := start(opts...)
	if !startFor(t, helper, env, usedEnv, err, s) {
		var none S
		return none
	}
	s.own(t)
	return s
}

// startFor ends tb's part in starting a fake: it fails tb with err, naming
// the helper and, when the server came from the environment variable env,
// the variable and its value; or skips tb when err is errTooFewServers from
// the environment. Otherwise it registers the fake's Close at tb's
// cleanup. It reports whether the fake started.
func startFor(tb testing.TB, helper, env string, usedEnv bool, err error, fake interface{ Close() error }) bool {
	tb.Helper()
	if err != nil {
		switch {
		case usedEnv && errors.Is(err, errTooFewServers):
			tb.Skipf("fakes: %v (%s=%q)", err, env, os.Getenv(env))
		case usedEnv:
			tb.Fatalf("fakes.%s: %s=%s: %v", helper, env, os.Getenv(env), err)
		default:
			tb.Fatalf("fakes.%s: %v", helper, err)
		}
		return false
	}
	tb.Cleanup(func() {
		if err := fake.Close(); err != nil {
			tb.Errorf("fakes.%s: cleanup: %v", helper, err)
		}
	})
	return true
}
