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
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// smallConfig is a quick run: 6 workers in 3 processes, 40 jobs, 2 calls
// at once.
func smallConfig(backend string) Config {
	return Config{Backend: backend, Permits: 2, Workers: 6, Procs: 3, Jobs: 40, Work: 200 * time.Microsecond}
}

func runCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// On every backend the API, counting from outside, never has more calls
// in flight than permits; every job runs once; no two calls share a token.
func TestRunKeepsTheLimit(t *testing.T) {
	for _, backend := range []string{"redis", "consul", "zk"} {
		t.Run(backend, func(t *testing.T) {
			cfg := smallConfig(backend)
			var out bytes.Buffer
			rep, err := Run(runCtx(t), cfg, &out)
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, out.String())
			}
			t.Logf("report:\n%s", out.String())
			l := rep.Limited
			if l.Calls != cfg.Jobs || l.Lost != 0 || l.Twice != 0 {
				t.Errorf("through the semaphore: %d calls, %d jobs lost, %d run twice; want %d calls, each job once", l.Calls, l.Lost, l.Twice, cfg.Jobs)
			}
			if l.MostInFlight < 1 || l.MostInFlight > cfg.Permits {
				t.Errorf("at most %d calls in flight, want 1 to %d", l.MostInFlight, cfg.Permits)
			}
			if l.SharedTokens != 0 {
				t.Errorf("%d calls shared a fencing token", l.SharedTokens)
			}
			if !rep.OK() {
				t.Error("OK() = false for a run within the limit")
			}
			// Whether the run without the semaphore breaks the limit
			// depends on scheduling: only check that it ran.
			if u := rep.Unlimited; u.Calls != cfg.Jobs || u.MostInFlight < 1 || u.MostInFlight > cfg.Workers {
				t.Errorf("without the semaphore: %+v", u)
			}
			for _, s := range []string{"through the semaphore", "without it", "PASS"} {
				if !strings.Contains(out.String(), s) {
					t.Errorf("report lacks %q", s)
				}
			}
		})
	}
}

// OK judges the run through the semaphore only.
func TestReportOK(t *testing.T) {
	within := Report{Permits: 2, Limited: Seen{Calls: 5, MostInFlight: 2}, Unlimited: Seen{Calls: 5, MostInFlight: 5}}
	if !within.OK() {
		t.Error("a run within the limit is not OK")
	}
	for name, bad := range map[string]Seen{
		"over the limit": {Calls: 5, MostInFlight: 3},
		"a job lost":     {Calls: 4, MostInFlight: 2, Lost: 1},
		"a job twice":    {Calls: 6, MostInFlight: 2, Twice: 1},
		"a shared token": {Calls: 5, MostInFlight: 2, SharedTokens: 2},
	} {
		if (Report{Permits: 2, Limited: bad}).OK() {
			t.Errorf("%s: OK", name)
		}
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for name, change := range map[string]func(*Config){
		"no permits":    func(c *Config) { c.Permits = 0 },
		"no workers":    func(c *Config) { c.Workers = 0 },
		"more procs":    func(c *Config) { c.Procs = c.Workers + 1 },
		"no jobs":       func(c *Config) { c.Jobs = 0 },
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
		{[]string{"-jobs", "10", "-workers", "4", "-procs", "2", "-work", "0s"}, 0},
		{[]string{"-h"}, 0},
		{[]string{"-backend", "memcached"}, 2},
		{[]string{"-permits", "x"}, 2},
		{[]string{"stray"}, 2},
	} {
		var out, errOut bytes.Buffer
		if got := run(c.args, &out, &errOut); got != c.want {
			t.Errorf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", c.args, got, c.want, out.String(), errOut.String())
		}
	}
}
