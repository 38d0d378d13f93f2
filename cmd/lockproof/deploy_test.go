package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/fakes/redisfake"
)

// recordingNemesis writes a nemesis command into a temporary directory that
// appends each call to a log and exits with status; it returns the
// command's path and the log's.
func recordingNemesis(t *testing.T, status string) (cmd, log string) {
	t.Helper()
	dir := t.TempDir()
	cmd, log = filepath.Join(dir, "nemesis"), filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$1 $2 $LOCKPROOF_NEMESIS_TARGET $LOCKPROOF_NEMESIS_NODES\" >> '" + log + "'\necho 'node on fire' >&2\nexit " + status + "\n"
	if err := os.WriteFile(cmd, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return cmd, log
}

// Every bad shape of the deployment flags is refused before any run, by
// check and by replay, with the flag and what it wants.
func TestDeployFlagsRefused(t *testing.T) {
	nemesis, log := recordingNemesis(t, "0")
	notExec := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-redis-sentinel", "h:1"}, "NAME@host:port"},
		{[]string{"-redis-sentinel", "@h:1"}, "NAME@host:port"},
		{[]string{"-redis-sentinel", "m@"}, "no address"},
		{[]string{"-redis-sentinel", "m@h:1,h"}, `got "h"`},
		{[]string{"-redis-sentinel", "m@h:0"}, "port from 1 to 65535"},
		{[]string{"-redis-sentinel", "m@h:1@x"}, "NAME@host:port"},
		{[]string{"-zk", "a:1,b"}, `got "b"`},
		{[]string{"-consul", "a:1,agent"}, "-consul agent"},
		{[]string{"-mysql", "root@tcp(h:1)/,root@tcp(h:2)/db"}, "without a database"},
		{[]string{"-mysql", "root@tcp(h:1)/,nodsn"}, "-mysql nodsn"},
		{[]string{"-nemesis", nemesis}, "want real servers"},
		{[]string{"-redis", "h:1", "-nemesis", filepath.Join(t.TempDir(), "missing")}, "want an executable"},
		{[]string{"-redis", "h:1", "-nemesis", notExec}, "want an executable"},
		{[]string{"-redis", "h:1", "-nemesis", nemesis, "-nemesis-timeout", "0s"}, "-nemesis-timeout"},
	} {
		for _, cmd := range []string{"check", "replay"} {
			args := append([]string{cmd}, tc.args...)
			if cmd == "replay" {
				args = append(args, "1")
			}
			var out, errOut bytes.Buffer
			if code := run(args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("%q: exit %d, want %d with %q; stderr:\n%s", args, code, exitUsage, tc.want, errOut.String())
			}
		}
	}
	if _, err := os.Stat(log); err == nil {
		t.Error("the nemesis was called by a refused command")
	}
}

// parseDeploy parses args with check's endpoint flags.
func parseDeploy(t *testing.T, args ...string) endpoints {
	t.Helper()
	var ep endpoints
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ep.flags(fs, "%s %s %s")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return ep
}

func TestDeployFlagsParsed(t *testing.T) {
	ep := parseDeploy(t, "-redis-sentinel", "mymaster@s1:26379, s2:26379", "-zk", "z1:2181, z2:2181,z3:2181")
	if ep.deploy.master != "mymaster" || !slices.Equal(ep.deploy.sentinels, []string{"s1:26379", "s2:26379"}) {
		t.Errorf("-redis-sentinel: %q %q", ep.deploy.master, ep.deploy.sentinels)
	}
	if ep.zk != "z1:2181,z2:2181,z3:2181" {
		t.Errorf("-zk: %q", ep.zk)
	}
}

// Sentinel replaces the embedded redislock cells; with -nemesis every real
// cell, and only those, is renamed and struck on as many nodes as its
// flag lists, so that its seeds do not replay without the nemesis.
func TestDeployCells(t *testing.T) {
	nemesis, _ := recordingNemesis(t, "0")
	base := parseDeploy(t, "-redis-sentinel", "m@s1:1,s2:1,s3:1", "-zk", "z1:1,z2:1", "-consul", "c1:1,c2:1,c3:1,c4:1", "-mysql", "r@tcp(m:1)/")
	struck := parseDeploy(t, "-redis-sentinel", "m@s1:1,s2:1,s3:1", "-zk", "z1:1,z2:1", "-consul", "c1:1,c2:1,c3:1,c4:1", "-mysql", "r@tcp(m:1)/", "-nemesis", nemesis)
	names := map[string]bool{}
	for _, c := range builtinCells(base) {
		names[c.name()] = true
		if c.lock == lockRedis && (!c.real || !strings.HasPrefix(c.faults, faultsSentinel)) {
			t.Errorf("with -redis-sentinel, redislock cell %s (real %v)", c.name(), c.real)
		}
	}
	// The replicated deployments' cells run with link faults (one MySQL
	// server is no replicated deployment); -link-faults=false takes them
	// out.
	for _, want := range []string{"redislock/sentinel+links", "zklock/crash+links", "consullock/crash+links", "mysqllock/crash"} {
		if !names[want] {
			t.Errorf("no %s cell among %v", want, names)
		}
	}
	unlinked := parseDeploy(t, "-redis-sentinel", "m@s1:1,s2:1,s3:1", "-zk", "z1:1,z2:1", "-link-faults=false")
	for _, c := range builtinCells(unlinked) {
		if strings.Contains(c.faults, "links") {
			t.Errorf("with -link-faults=false, cell %s", c.name())
		}
	}
	wantNodes := map[string]int{lockRedis: 3, lockZK: 2, lockConsul: 4, lockMySQL: 1}
	ids := map[uint16]bool{}
	for _, c := range builtinCells(base) {
		ids[c.id()] = true
	}
	for _, c := range builtinCells(struck) {
		if !c.real {
			if strings.Contains(c.faults, "nemesis") {
				t.Errorf("embedded cell %s struck by the nemesis", c.name())
			}
			continue
		}
		if !strings.HasSuffix(c.faults, "+nemesis") || ids[c.id()] {
			t.Errorf("real cell %s not renamed for the nemesis", c.name())
		}
		if n := struck.nodesOf(&c); n != wantNodes[c.lock] {
			t.Errorf("%s: %d nodes, want %d", c.name(), n, wantNodes[c.lock])
		}
	}
}

// check calls the nemesis at its fault points on a real server (miniredis
// listening on loopback, taken for a real Redis): every call is of the
// protocol, each injection healed, and the faults are the cell's,
// reported as unclaimed. (A failing call is tested in backends: here
// the failed run's minimization would take check's shrink bound.)
func TestCheckCallsTheNemesis(t *testing.T) {
	r, err := redisfake.Start(redisfake.ForceMiniredis())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	nemesis, log := recordingNemesis(t, "0")
	var out, errOut bytes.Buffer
	code := run([]string{"check", "-redis", r.Addr(), "-nemesis", nemesis, "-locks", "redislock", "-runs", "2", "-steps", "10",
		"-seed", "7", "-json", "-html", ""}, &out, &errOut)
	var res checkResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res.Cells) != 1 {
		t.Fatalf("exit %d, %v; stdout:\n%s\nstderr:\n%s", code, err, out.String(), errOut.String())
	}
	c := res.Cells[0]
	if c.Faults != "crash+nemesis" || c.Error != "" {
		t.Fatalf("cell %s/%s: %s", c.Lock, c.Faults, c.Error)
	}
	for _, k := range []string{"node-down", "node-pause", "partition", "clock-skew"} {
		if !slices.Contains(c.Unclaimed, k) {
			t.Errorf("fault kind %s not among the cell's unclaimed %v", k, c.Unclaimed)
		}
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("the nemesis was never called in %d runs: %v", c.Runs, err)
	}
	heals := map[string]string{"kill": "start", "pause": "resume", "partition": "heal", "skew": "unskew"}
	open := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[1] != "0" || f[2] != lockRedis || f[3] != "1" {
			t.Fatalf("call %q, want <action> 0 redislock 1", line)
		}
		if h, ok := heals[f[0]]; ok {
			open[h]++
		} else if open[f[0]]--; open[f[0]] < 0 {
			t.Fatalf("%q heals nothing injected", line)
		}
	}
	for h, n := range open {
		if n != 0 {
			t.Errorf("%d injections never healed by %s", n, h)
		}
	}

}
