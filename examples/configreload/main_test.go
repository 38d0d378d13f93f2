package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockproof/lockproof/fakes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, fakes.ZKFlushWedge()) } // go-zookeeper/zk#163

// smallConfig is a quick run: 6 readers and 2 reloaders in 3 processes,
// 10 reloads of 3 parts.
func smallConfig(backend string) Config {
	return Config{Backend: backend, Procs: 3, Readers: 6, Writers: 2, Reloads: 10, Parts: 3, Step: 100 * time.Microsecond}
}

func runCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// On every backend the store, watching from outside, sees no torn read and
// no reload beside a read or another reload; every reload is applied.
func TestRunKeepsEveryReadWhole(t *testing.T) {
	for _, backend := range []string{"redis", "etcd", "consul", "zk"} {
		t.Run(backend, func(t *testing.T) {
			cfg := smallConfig(backend)
			var out bytes.Buffer
			rep, err := Run(runCtx(t), cfg, &out)
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, out.String())
			}
			t.Logf("report:\n%s", out.String())
			l := rep.Locked
			if l.Torn != 0 || l.Overlaps != 0 || l.StaleRefused != 0 {
				t.Errorf("through the lock: %d torn reads, %d overlapping reloads, %d refused as stale; want none", l.Torn, l.Overlaps, l.StaleRefused)
			}
			if l.Reloads != cfg.Reloads || l.Reads < 1 {
				t.Errorf("through the lock: %d reloads of %d, %d reads", l.Reloads, cfg.Reloads, l.Reads)
			}
			if !rep.OK() {
				t.Error("OK() = false for a run with every read whole")
			}
			// Whether readers overlap, and whether the run without the
			// lock tears a read, depends on scheduling: only check that
			// it ran.
			if u := rep.Unlocked; u.Reloads != cfg.Reloads {
				t.Errorf("without the lock: %+v", u)
			}
			for _, s := range []string{"through the lock", "without it", "PASS"} {
				if !strings.Contains(out.String(), s) {
					t.Errorf("report lacks %q", s)
				}
			}
		})
	}
}

// A "read-write lock" whose readers and writers take two unrelated
// mutexes excludes nothing between the two sides: the store must see it.
func TestRunCatchesALockThatLetsReadersBesideAWriter(t *testing.T) {
	be := &backend{name: "two unrelated mutexes", close: func() error { return nil },
		lock: func(string) (rwLock, error) {
			r, err := fakes.NewMemLock("config-read")
			if err != nil {
				return rwLock{}, err
			}
			w, err := fakes.NewMemLock("config-write")
			if err != nil {
				return rwLock{}, err
			}
			return rwLock{read: r, write: w}, nil
		}}
	cfg := smallConfig("memlock")
	cfg.Procs, cfg.Readers, cfg.Reloads, cfg.Parts, cfg.Step = 1, 1, 20, 4, time.Millisecond
	var out bytes.Buffer
	rep, err := runOn(runCtx(t), cfg, be, &out)
	if err != nil {
		t.Fatalf("runOn: %v\n%s", err, out.String())
	}
	if rep.OK() || rep.Locked.Torn+rep.Locked.Overlaps == 0 {
		t.Fatalf("a lock that lets a reader beside a writer passed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "FAIL") {
		t.Errorf("report lacks FAIL:\n%s", out.String())
	}
}

// OK judges the run through the lock only.
func TestReportOK(t *testing.T) {
	within := Report{Reloads: 3, Locked: Seen{Reads: 5, Reloads: 3}, Unlocked: Seen{Reloads: 3, Torn: 2, Overlaps: 3}}
	if !within.OK() {
		t.Error("a run with every read whole is not OK")
	}
	for name, bad := range map[string]Seen{
		"a torn read":          {Reads: 5, Reloads: 3, Torn: 1},
		"an overlapping write": {Reads: 5, Reloads: 3, Overlaps: 1},
		"a stale reload":       {Reads: 5, Reloads: 2, StaleRefused: 1},
		"a lost reload":        {Reads: 5, Reloads: 2},
	} {
		if (Report{Reloads: 3, Locked: bad}).OK() {
			t.Errorf("%s: OK", name)
		}
	}
}

// The store's own checks, one at a time: a reload refused for a token
// no higher than one already shown, and one beside a read.
func TestStoreFencesAndCounts(t *testing.T) {
	s := newStore(2, 0)
	s.read(5)
	s.reload(5) // not above the reader's token
	s.reload(6)
	s.reload(4) // below the last reload's
	if got := s.report(); got.StaleRefused != 2 || got.Reloads != 1 || got.Overlaps != 0 || got.Reads != 1 || got.Torn != 0 {
		t.Fatalf("seen %+v, want 2 refused, 1 reload, 1 whole read", got)
	}
	if s.parts[0] != "v1" || s.parts[1] != "v1" {
		t.Fatalf("parts %q, want both v1", s.parts)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for name, change := range map[string]func(*Config){
		"no reloaders":  func(c *Config) { c.Writers = 0 },
		"more procs":    func(c *Config) { c.Procs = c.Readers + c.Writers + 1 },
		"no reloads":    func(c *Config) { c.Reloads = 0 },
		"one part":      func(c *Config) { c.Parts = 1 },
		"negative step": func(c *Config) { c.Step = -time.Millisecond },
		"no such store": func(c *Config) { c.Backend = "memcached" },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := smallConfig("redis")
			change(&cfg)
			if _, err := Run(runCtx(t), cfg, io.Discard); !errors.Is(err, errConfig) {
				t.Fatalf("Run: %v, want an error wrapping %v", err, errConfig)
			}
		})
	}
}

func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"-reloads", "4", "-readers", "3", "-procs", "2", "-step", "0s"}, 0},
		{[]string{"-h"}, 0},
		{[]string{"-backend", "memcached"}, 2},
		{[]string{"-parts", "x"}, 2},
		{[]string{"stray"}, 2},
	} {
		var out, errOut bytes.Buffer
		if got := run(c.args, &out, &errOut); got != c.want {
			t.Errorf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", c.args, got, c.want, out.String(), errOut.String())
		}
	}
}
