package backends

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// nemesisScript writes a shell script into a temporary directory that
// appends its arguments and environment to a log, then runs body, and
// returns the script's path and the log's.
func nemesisScript(t *testing.T, body string) (script, log string) {
	t.Helper()
	dir := t.TempDir()
	script, log = filepath.Join(dir, "nemesis"), filepath.Join(dir, "calls")
	text := "#!/bin/sh\necho \"$1 $2 $LOCKPROOF_NEMESIS_NODES $LOCKPROOF_NEMESIS_TARGET\" >> '" + log + "'\n" + body + "\n"
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, log
}

// The suite calls the nemesis at its fault points: every call is an action
// of the protocol on a node in range, every injection is healed by its
// pair, and the faults are the run's (unclaimed, so not a failure).
func TestNemesisCalledAtFaultPoints(t *testing.T) {
	suitemain.SetChecks(t, 5)
	pinSeed(t, "3")
	script, log := nemesisScript(t, "exit 0")
	rep := propertytest.Check(t, WithNemesis(RedisLock(), Nemesis{Path: script, Nodes: 3, Target: "redislock"}), propertytest.Options{})
	if rep.Failed {
		t.Fatalf("the run failed: %s", rep.Output)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("the nemesis was never called in %d runs: %v", rep.Runs, err)
	}
	pairs := map[string]string{"kill": "start", "pause": "resume", "partition": "heal", "skew": "unskew"}
	open := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || !slices.Contains([]string{"0", "1", "2"}, f[1]) || f[2] != "3" || f[3] != "redislock" {
			t.Fatalf("bad call %q", line)
		}
		if heal, ok := pairs[f[0]]; ok {
			open[heal+" "+f[1]]++
			continue
		}
		if open[f[0]+" "+f[1]] == 0 {
			t.Fatalf("%q heals nothing injected", line)
		}
		open[f[0]+" "+f[1]]--
	}
	for k, n := range open {
		if n != 0 {
			t.Errorf("%d injections left without %q", n, k)
		}
	}
	for _, k := range NemesisKinds() {
		if !slices.Contains(rep.Unclaimed, k) {
			t.Errorf("fault kind %s not among the run's unclaimed kinds %v", k, rep.Unclaimed)
		}
	}
}

// A failing call fails the run, its stderr in the message.
func TestNemesisFailureFailsTheRun(t *testing.T) {
	suitemain.SetChecks(t, 20)
	script, _ := nemesisScript(t, "echo 'no such node' >&2; exit 3")
	rep := propertytest.Check(t, WithNemesis(RedisLock(), Nemesis{Path: script, Nodes: 1}), propertytest.Options{})
	if !rep.Failed || !strings.Contains(rep.Output, "no such node") || !strings.Contains(rep.Output, "exit status 3") {
		t.Fatalf("failed %v, output:\n%s", rep.Failed, rep.Output)
	}
}

func TestNemesisCheck(t *testing.T) {
	script, _ := nemesisScript(t, "exit 0")
	for _, n := range []Nemesis{{}, {Path: filepath.Join(t.TempDir(), "missing"), Nodes: 1}, {Path: script}} {
		if err := n.Check(); err == nil {
			t.Errorf("%+v: no error", n)
		}
	}
	if err := (Nemesis{Path: script, Nodes: 1}).Check(); err != nil {
		t.Errorf("a good nemesis refused: %v", err)
	}
}
