package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The files the README's commands write into the repository are ignored by
// git: check's default report, and the binary go build leaves.
func TestGitignoreCoversWhatTheREADMEWrites(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on PATH")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{defaultReport, "cmd/lockproof/" + defaultReport, "lockproof"} {
		cmd := exec.Command(git, "check-ignore", "--no-index", "-q", name)
		cmd.Dir = root
		if err := cmd.Run(); err != nil {
			out, _ := exec.Command(git, "-C", root, "check-ignore", "--no-index", "-v", name).CombinedOutput()
			t.Errorf("%s is not ignored by .gitignore (git check-ignore: %v %s)", name, err, strings.TrimSpace(string(out)))
		}
	}
}

// Output paths are checked before the run: a missing directory, a path
// under a file, a directory where a file goes are refused at once, and
// nothing is left behind.
func TestOutputPathsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	file := write(t, "plain", "not a directory")
	small := []string{"-backends", "redis", "-runs", "1", "-n", "2", "-uncontended", "2", "-waiters", "2"}
	check := []string{"check", "-locks", "redislock", "-faults", "crash", "-runs", "1"}
	missing := filepath.Join(dir, "nonexistent", "r.html")
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(check, "-html", missing), "-html " + missing + ": directory " + filepath.Dir(missing) + " does not exist"},
		{append(check, "-html", dir), "-html " + dir + ": is a directory"},
		{append(check, "-html", "", "-histories", filepath.Join(file, "h")), "-histories " + filepath.Join(file, "h")},
		{append(check, "-html", "", "-out", filepath.Join(file, "timelines")), "-out " + filepath.Join(file, "timelines")},
		{append(append([]string{"bench"}, small...), "-json", missing), "-json " + missing},
		{append(append([]string{"bench"}, small...), "-html", filepath.Join(file, "b.html")), "is not a directory"},
		{[]string{"replay", "-out", filepath.Join(file, "x"), "1"}, "-out " + filepath.Join(file, "x")},
		{[]string{"replay", "-histories", filepath.Join(file, "x"), "1"}, "-histories " + filepath.Join(file, "x")},
		{[]string{"history", "-html", missing, write(t, "h.json", doubleGrant)}, "-html " + missing},
	} {
		var out, errOut bytes.Buffer
		start := time.Now()
		if code := run(c.args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut.String(), exitUsage, c.want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%v: took %v to refuse: the run started first", c.args, d)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".lockproof-probe-*")); len(left) > 0 {
		t.Errorf("probe files left behind: %v", left)
	}
}

// Every bad flag value is refused before any work starts, with exit status
// 2 and a message that names the flag and the value.
func TestBadFlagValuesAreNamed(t *testing.T) {
	small := []string{"-backends", "redis", "-runs", "1", "-n", "2", "-uncontended", "2", "-waiters", "2", "-cell-time", "1s"}
	benchWith := func(extra ...string) []string { return append(append([]string{"bench"}, small...), extra...) }
	checkWith := func(extra ...string) []string {
		return append([]string{"check", "-locks", "redislock", "-faults", "crash", "-runs", "1", "-html", ""}, extra...)
	}
	doubleGrantFile := write(t, "h.json", doubleGrant)
	for _, c := range []struct {
		args []string
		want string
	}{
		{benchWith("-runs", "0"), "-runs 0"},
		{benchWith("-n", "0"), "-n 0"},
		{benchWith("-uncontended", "0"), "-uncontended 0"},
		{benchWith("-hold", "-1s"), "-hold -1s"},
		{benchWith("-noisy", "-1"), "-noisy -1"},
		{benchWith("-noisy", "NaN"), "-noisy NaN"},
		{benchWith("-cell-time", "-1s"), "-cell-time -1s"},
		{benchWith("-waiters", "4,x"), `-waiters "4,x"`},
		{benchWith("-waiters", "1"), `-waiters "1"`},
		{checkWith("-runs", "-1"), "-runs -1"},
		{checkWith("-steps", "0"), "-steps 0"},
		{[]string{"check", "-budget", "0"}, "-budget 0s"},
		{[]string{"check", "-budget", "-5s"}, "-budget -5s"},
		{[]string{"replay", "-steps", "0", "1"}, "-steps 0"},
		{[]string{"replay", "-shrinkruns", "-1", "1"}, "-shrinkruns -1"},
		{[]string{"history", "-ttl", "0s", doubleGrantFile}, "-ttl 0s"},
		{[]string{"history", "-tolerance", "-1ms", doubleGrantFile}, "-tolerance -1ms"},
		{[]string{"history", "-timeout", "0s", doubleGrantFile}, "-timeout 0s"},
		{[]string{"history", "-model", "nope", doubleGrantFile}, `-model "nope"`},
	} {
		var out, errOut bytes.Buffer
		start := time.Now()
		code := run(c.args, &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and a message naming %q", c.args, code, errOut.String(), exitUsage, c.want)
		}
		for _, work := range []string{"run 1/", "cells, seed", "replaying"} {
			if strings.Contains(errOut.String()+out.String(), work) {
				t.Errorf("%v: work started before the flags were checked (%q)", c.args, work)
			}
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%v: took %v to refuse", c.args, d)
		}
	}
}
