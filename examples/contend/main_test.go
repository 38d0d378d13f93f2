package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// envRedisAddr points the tests at a real server, as for package fakes.
const envRedisAddr = "LOCKPROOF_REDIS_ADDR"

// smallConfig is a quick run: 8 workers × 25 rounds, on the real server named
// by envRedisAddr when it is set.
func smallConfig() Config {
	c := DefaultConfig()
	c.Workers, c.Procs, c.Rounds = 8, 2, 25
	c.RedisAddr = os.Getenv(envRedisAddr)
	return c
}

func runCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestRun(t *testing.T) {
	cfg := smallConfig()
	var out bytes.Buffer
	rep, err := Run(runCtx(t), cfg, &out)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	t.Logf("report:\n%s", out.String())
	want := cfg.Workers * cfg.Rounds
	l := rep.Locked
	if l.Counter != want || l.Expected != want {
		t.Errorf("fenced counter = %d (expected %d), want %d: updates lost under the lock", l.Counter, l.Expected, want)
	}
	if l.Rejections != 0 {
		t.Errorf("the fence refused %d stale accesses", l.Rejections)
	}
	if l.Acquisitions != want {
		t.Errorf("acquisitions = %d, want %d", l.Acquisitions, want)
	}
	if int(l.HighestToken) < l.Acquisitions {
		t.Errorf("highest token %v below the %d acquisitions", l.HighestToken, l.Acquisitions)
	}
	if !rep.OK() {
		t.Error("OK() = false for a run that lost nothing")
	}
	// Whether the unlocked run loses updates depends on scheduling: only
	// check that it ran and was reported.
	u := rep.Unlocked
	if u.Expected != want || u.Counter < 1 || u.Counter > want || u.Lost != want-u.Counter {
		t.Errorf("unlocked run: %+v, want a counter in [1, %d] and Lost = %d - counter", u, want, want)
	}
	for _, s := range []string{"with the lock", "fence rejections", "without a lock", "lost updates", "PASS"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q", s)
		}
	}
	if cfg.RedisAddr != "" {
		assertNoKeys(t, cfg.RedisAddr, rep.Prefix)
	}
}

// assertNoKeys fails unless the server at addr has no key under prefix.
func assertNoKeys(t *testing.T, addr, prefix string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer c.Close()
	ctx := runCtx(t)
	var keys []string
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN %s*: %v", prefix, err)
	}
	if len(keys) > 0 {
		t.Errorf("Run left keys behind: %q", keys)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for name, change := range map[string]func(*Config){
		"no workers":        func(c *Config) { c.Workers = 0 },
		"no procs":          func(c *Config) { c.Procs = 0 },
		"more procs":        func(c *Config) { c.Procs = c.Workers + 1 },
		"no rounds":         func(c *Config) { c.Rounds = 0 },
		"TTL below minimum": func(c *Config) { c.TTL = time.Millisecond },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := smallConfig()
			change(&cfg)
			if _, err := Run(runCtx(t), cfg, io.Discard); !errors.Is(err, errConfig) {
				t.Fatalf("Run: %v, want an error wrapping %v", err, errConfig)
			}
		})
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	if _, err := Run(ctx, smallConfig(), &out); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want an error wrapping context.Canceled", err)
	}
	if out.Len() != 0 {
		t.Errorf("a failed run printed a report:\n%s", out.String())
	}
}

func TestRunUnreachableRedis(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there any more
	cfg := smallConfig()
	cfg.RedisAddr = addr
	if _, err := Run(runCtx(t), cfg, io.Discard); err == nil || !strings.Contains(err.Error(), "PING") {
		t.Fatalf("Run on %s: %v, want a PING error", addr, err)
	}
}

func TestExitStatus(t *testing.T) {
	small := []string{"-workers", "4", "-procs", "2", "-rounds", "5"}
	if addr := os.Getenv(envRedisAddr); addr != "" {
		small = append(small, "-redis", addr)
	}
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"clean run", small, 0},
		{"help", []string{"-h"}, 0},
		{"unknown flag", []string{"-bogus"}, 2},
		{"stray argument", []string{"now"}, 2},
		{"zero timeout", []string{"-timeout", "0s"}, 2},
		{"invalid config", []string{"-procs", "0"}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(c.args, &stdout, &stderr); got != c.want {
				t.Fatalf("run(%q) = %d, want %d\nstdout:\n%s\nstderr:\n%s", c.args, got, c.want, &stdout, &stderr)
			}
		})
	}
}
