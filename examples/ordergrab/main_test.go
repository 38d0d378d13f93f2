package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOnlyTheDistributedLockIsRight: with no lock every driver wins, with a
// per-instance mutex one driver per instance does, with redislock exactly
// one.
func TestOnlyTheDistributedLockIsRight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	// A window wide enough that every instance's first check falls in it
	// on a loaded machine too.
	cfg := Config{Instances: 3, Drivers: 4, Work: 50 * time.Millisecond}
	rep, err := Run(ctx, cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if n := rep.Winners[ModeRedisLock]; n != 1 {
		t.Fatalf("redislock: %d winners, want exactly 1", n)
	}
	if n := rep.Winners[ModeNone]; n < 2 {
		t.Errorf("no lock: %d winners; the race should have let several win", n)
	}
	if n := rep.Winners[ModeLocal]; n < 2 || n > cfg.Instances {
		t.Errorf("local mutex: %d winners, want 2..%d (at most one per instance)", n, cfg.Instances)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{{Instances: 1, Drivers: 1}, {Instances: 2}, {Instances: 2, Drivers: 1, Work: -1}} {
		if _, err := Run(context.Background(), cfg, &bytes.Buffer{}); err == nil {
			t.Errorf("Run(%+v) accepted", cfg)
		}
	}
}

func TestExitStatus(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-instances", "2", "-drivers", "2", "-work", "2ms"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d; stderr %q", code, errOut.String())
	}
	if !strings.Contains(out.String(), "redislock") {
		t.Fatalf("output lacks the redislock line:\n%s", out.String())
	}
	if code := run([]string{"-instances", "1"}, &out, &errOut); code != 1 {
		t.Fatalf("bad config: exit %d, want 1", code)
	}
	if code := run([]string{"-nope"}, &out, &errOut); code != 2 {
		t.Fatalf("bad flag: exit %d, want 2", code)
	}
}
