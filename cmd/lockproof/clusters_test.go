package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/lab"
	"github.com/lockproof/lockproof/propertytest"
)

// -clusters picks only the cells on the lab's clusters, all by default and
// by -locks among them; its cells are real, their ids not the embedded
// cells', and each knows its cluster.
func TestClusterCellSelection(t *testing.T) {
	all, err := selectCells(endpoints{}, true, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range all {
		names = append(names, c.name())
		if c.kind == nil || c.onCluster == nil || !c.real {
			t.Errorf("%s: kind %v, real %v", c.name(), c.kind, c.real)
		}
	}
	if got := strings.Join(names, " "); got != "etcdlock/leader zklock/leader consullock/leader redislock/failover redlock/restart redlock/restart-empty mysqllock/skew" {
		t.Fatalf("cluster cells %q", got)
	}
	// A cell may divide -steps less than clusterSteps: the expected cells
	// of redlock and mysqllock run all of them.
	for _, c := range all {
		want := 30 / clusterSteps
		if c.name() == "redlock/restart-empty" || c.name() == "mysqllock/skew" {
			want = 30
		}
		if got := c.stepsOf(30); got != want {
			t.Errorf("%s: %d steps a run of -steps 30, want %d", c.name(), got, want)
		}
	}
	zk, err := selectCells(endpoints{}, true, lockZK, "")
	if err != nil || len(zk) != 1 || zk[0].kind.name != "zookeeper" {
		t.Fatalf("-clusters -locks zklock: %v %v", zk, err)
	}
	if _, err := selectCells(endpoints{}, true, "redis-semaphore", ""); err == nil {
		t.Error("-clusters -locks redis-semaphore: want unknown lock, no cluster runs it")
	}
	def, err := selectCells(endpoints{}, false, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range def {
		if c.kind != nil {
			t.Errorf("the default matrix runs %s on a cluster", c.name())
		}
		if c.name() == "etcdlock/leader" {
			t.Error("the default matrix has the cluster cell etcdlock/leader")
		}
	}
}

// clustersMissing names each reason once, with the clusters it stops, and
// nothing when every cluster can run.
func TestClustersMissing(t *testing.T) {
	kinds := []clusterKind{
		{name: "a", unavailable: func() string { return "needs root" }, cells: []clusterCell{{lock: "x", faults: "f"}}},
		{name: "b", unavailable: func() string { return "needs root" }, cells: []clusterCell{{lock: "y", faults: "f"}}},
		{name: "c", unavailable: func() string { return "no server c" }, cells: []clusterCell{{lock: "z", faults: "f"}}},
		{name: "d", unavailable: func() string { return "" }, cells: []clusterCell{{lock: "w", faults: "f"}}},
	}
	cells := clusterCells(kinds)
	if got, want := clustersMissing(cells), "needs root (a, b); no server c (c)"; got != want {
		t.Errorf("missing %q, want %q", got, want)
	}
	if got := clustersMissing(cells[3:]); got != "" {
		t.Errorf("a cluster that can run: missing %q", got)
	}
}

// -clusters refuses a user's own servers as bad usage, and where the lab
// or a server is missing it fails before any work, naming what is missing,
// without entering the sandbox.
func TestCheckClustersRefuses(t *testing.T) {
	sandboxMain = func() { t.Fatal("entered the sandbox") }
	defer func() { sandboxMain = lab.SandboxMain }()
	for _, args := range [][]string{
		{"check", "-clusters", "-etcd", "http://127.0.0.1:2379"},
		{"check", "-clusters", "-zk", "127.0.0.1:2181"},
		{"check", "-clusters", "-locks", "redis-semaphore"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != exitUsage || errOut.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut.String())
		}
	}
	t.Setenv(lab.EnvLab, "") // restored after the test: enterLab sets it
	etcdBin, javaDir := lab.EtcdBinary, lab.JavaDir
	lab.EtcdBinary, lab.JavaDir = "/nonexistent/etcd", "/nonexistent/java"
	defer func() { lab.EtcdBinary, lab.JavaDir = etcdBin, javaDir }()
	var out, errOut bytes.Buffer
	code := run([]string{"check", "-clusters", "-html", ""}, &out, &errOut)
	msg := errOut.String()
	// The cells that cannot run are listed in parentheses at the end: etcd
	// and zookeeper at least (more where the machine lacks nft or a server).
	_, cells, _ := strings.Cut(msg, " (")
	if code != exitError || !strings.Contains(msg, "cannot run here") ||
		!strings.Contains(cells, "etcd") || !strings.Contains(cells, "zookeeper") {
		t.Fatalf("exit %d, stderr %q", code, msg)
	}
	if out.Len() != 0 || strings.Contains(msg, "plan:") {
		t.Errorf("work started: stdout %q, stderr %q", out.String(), msg)
	}
}

// A cluster starts before its first cell and is closed after its last,
// one at a time, and a cluster that does not start is the error of its
// cells, not tried again.
func TestClusterLife(t *testing.T) {
	notify := notifyInterrupt
	notifyInterrupt = func(chan<- os.Signal) {} // see notifyInterrupt
	defer func() { notifyInterrupt = notify }()
	var events []string
	kind := func(name string, fail bool) clusterKind {
		return clusterKind{name: name, unavailable: func() string { return "" },
			start: func(_ context.Context, _ func(string, ...any)) (io.Closer, error) {
				events = append(events, "start "+name)
				if fail {
					return nil, errors.New("no leader")
				}
				return closer(func() error { events = append(events, "close "+name); return nil }), nil
			},
			cells: []clusterCell{{lock: name + "1", faults: "f"}, {lock: name + "2", faults: "f"}}}
	}
	kinds := []clusterKind{kind("a", false), kind("b", true)}
	for i := range kinds {
		for j := range kinds[i].cells {
			kinds[i].cells[j].factory = func(io.Closer) propertytest.Factory { return nil }
		}
	}
	cells := clusterCells(kinds)
	life := newClusterLife(func(string) {})
	var errs []error
	for i := range cells {
		_, err := life.factory(cells, i, func(string) {})
		_, err2 := life.factory(cells, i, func(string) {}) // a cell's second run
		errs = append(errs, err, err2)
		if err := life.after(cells, i, func(string) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := life.done(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(events, "; "), "start a; close a; start b"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
	for i, err := range errs {
		if (i >= 4) != (err != nil) {
			t.Errorf("call %d: error %v", i, err)
		}
	}
}

// A cluster's start runs under its kind's start limit, the default when
// it names none; Galera's is longer than the default.
func TestClusterStartLimit(t *testing.T) {
	notify := notifyInterrupt
	notifyInterrupt = func(chan<- os.Signal) {} // see notifyInterrupt
	defer func() { notifyInterrupt = notify }()
	var left []time.Duration
	kind := func(name string, limit time.Duration) clusterKind {
		return clusterKind{name: name, unavailable: func() string { return "" }, startLimit: limit,
			start: func(ctx context.Context, _ func(string, ...any)) (io.Closer, error) {
				deadline, ok := ctx.Deadline()
				if !ok {
					t.Errorf("%s: start without a deadline", name)
				}
				left = append(left, time.Until(deadline))
				return closer(func() error { return nil }), nil
			},
			cells: []clusterCell{{lock: name, faults: "f", factory: func(io.Closer) propertytest.Factory { return nil }}}}
	}
	cells := clusterCells([]clusterKind{kind("a", 0), kind("b", galeraStartLimit)})
	life := newClusterLife(func(string) {})
	for i := range cells {
		if _, err := life.factory(cells, i, func(string) {}); err != nil {
			t.Fatal(err)
		}
		if err := life.after(cells, i, func(string) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := life.done(); err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0] > defaultStartLimit || left[0] < defaultStartLimit-time.Minute ||
		left[1] > galeraStartLimit || left[1] <= defaultStartLimit {
		t.Errorf("time left to start: %v, want about %v then %v", left, defaultStartLimit, galeraStartLimit)
	}
	for _, k := range clusterKinds() {
		if k.name == "galera" && k.startLimit != galeraStartLimit {
			t.Errorf("the galera kind's start limit is %v, want %v", k.startLimit, galeraStartLimit)
		}
	}
}

type closer func() error

func (c closer) Close() error { return c() }

// An expected violation's history is saved, read back by lockproof
// history's own code, and its verdict printed; a history file that is not
// one is reported as not read.
func TestCheckRechecksExpectedHistories(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	args := []string{"check", "-locks", lockRedis, "-faults", "failover", "-runs", "20", "-seed", "7", "-json", "-html", "", "-histories", dir}
	if code := run(args, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut.String())
	}
	var res checkResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	var v *violationOut
	for i := range res.Cells[0].Violations {
		v = &res.Cells[0].Violations[i]
	}
	if v == nil || v.File == "" {
		t.Fatalf("no expected violation with a saved history: %+v", res.Cells[0])
	}
	if v.Rechecked == "" || v.Rechecked != v.Verdict {
		t.Errorf("rechecked %q, the run's checker %q", v.Rechecked, v.Verdict)
	}
	var table bytes.Buffer
	printTable(&table, res)
	if want := v.Recheck + ": " + v.Rechecked; !strings.Contains(table.String(), want) {
		t.Errorf("the table does not say %q:\n%s", want, table.String())
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"version": 2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := recheck(bad); !strings.HasPrefix(got, "not read: ") {
		t.Errorf("a malformed history rechecked as %q", got)
	}
}

// LOCKPROOF_LAB=1, as root: lockproof check -clusters on etcd, from the
// binary as a user runs it (it enters the sandbox itself), passes with its
// table, plan and note.
func TestCheckClustersOnEtcd(t *testing.T) {
	bin := labBinary(t)
	cmd := exec.Command(bin, "check", "-clusters", "-locks", lockEtcd, "-runs", "3", "-seed", "5", "-html", "", "-histories", t.TempDir())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	began := time.Now()
	err := cmd.Run()
	t.Logf("%v\nstdout:\n%s\nstderr:\n%s", time.Since(began).Round(time.Second), out.String(), errOut.String())
	if err != nil {
		t.Fatalf("exit: %v", err)
	}
	table := out.String()
	for _, want := range []string{"etcdlock  leader", "verdict: pass", bestEffortNote} {
		if !strings.Contains(table, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if strings.Contains(table, "lockproof check -locks etcdlock") && !strings.Contains(table, "-clusters\n") {
		t.Error("a hint for more runs without -clusters")
	}
	if !strings.Contains(errOut.String(), "plan: 1 cell on the lab's real clusters") {
		t.Error("no plan on stderr")
	}
	if strings.Count(table, "best effort") != 1 {
		t.Error("the best-effort note is not said once")
	}
}

// replay -clusters takes only the seeds of check -clusters, refuses a
// user's servers, and fails before any work where a server is missing;
// without -clusters, a cluster's seed is refused naming the flag.
func TestReplayClustersRefuses(t *testing.T) {
	zk := clusterCells(clusterKinds())[1]
	clusterSeed := cellSeed(&zk, 5, 0)
	embedded := allCells(endpoints{})[0]
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"replay", "-clusters", "-zk", "127.0.0.1:2181", fmt.Sprint(clusterSeed)}, exitUsage, "leave it out"},
		{[]string{"replay", "-clusters", fmt.Sprint(cellSeed(&embedded, 5, 0))}, exitUsage, "names no cell of check -clusters"},
		{[]string{"replay", fmt.Sprint(clusterSeed)}, exitUsage, "on -clusters"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != tc.code || !strings.Contains(errOut.String(), tc.says) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d saying %q", tc.args, code, errOut.String(), tc.code, tc.says)
		}
	}
	t.Setenv(lab.EnvLab, "") // restored after the test: enterSandbox sets it
	javaDir := lab.JavaDir
	lab.JavaDir = "/nonexistent/java"
	defer func() { lab.JavaDir = javaDir }()
	sandboxMain = func() { t.Fatal("entered the sandbox with a server missing") }
	defer func() { sandboxMain = lab.SandboxMain }()
	var out, errOut bytes.Buffer
	code := run([]string{"replay", "-clusters", fmt.Sprint(clusterSeed)}, &out, &errOut)
	if msg := errOut.String(); code != exitError || !strings.Contains(msg, "cannot run here") || !strings.Contains(msg, "(zookeeper)") {
		t.Fatalf("exit %d, stderr %q", code, msg)
	}
	if out.Len() != 0 {
		t.Errorf("work started: stdout %q", out.String())
	}
}

// LOCKPROOF_LAB=1, as root: lockproof replay -clusters starts the seed's
// cluster in the sandbox and replays its run there, saying that the
// replay is best effort.
func TestReplayClustersOnEtcd(t *testing.T) {
	bin := labBinary(t)
	etcd := clusterCells(clusterKinds())[0]
	cmd := exec.Command(bin, "replay", "-clusters", "-histories", t.TempDir(), fmt.Sprint(cellSeed(&etcd, 5, 0)))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	if err != nil {
		t.Fatalf("exit: %v", err)
	}
	for _, want := range []string{"replaying etcdlock/leader", bestEffortNote, "did not reproduce"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if !strings.Contains(errOut.String(), "the etcd cluster is up") {
		t.Error("no cluster started")
	}
}

// labBinary is this lockproof built for a test that runs it on the lab's
// etcd as a user does; the test skips where that cluster cannot run.
func labBinary(t *testing.T) string {
	t.Helper()
	if why := lab.EtcdUnavailable(); why != "" {
		t.Skip(why)
	}
	bin := filepath.Join(t.TempDir(), "lockproof")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// A cell stated to show a violation stops at the first run that shows
// it, and that run is the one a batch of runs from the same seed makes
// at the same place: one run at a time changes no run's seed. (The cell
// is redislock's on the embedded simulated replica, whose failover loses
// locks as the lab's Sentinel group does, and whose runs replay exactly.)
func TestStatedViolationStopsTheCell(t *testing.T) {
	var failover cell
	for _, c := range builtinCells(endpoints{}) {
		if c.lock == lockRedis && c.faults == "failover" {
			failover = c
		}
	}
	if failover.lock == "" {
		t.Fatal("no redislock/failover cell")
	}
	cfg := quickConfig(t)
	cfg.runs, cfg.seed = 20, 11 // seed 11: the fifth run is the first to show it
	shows := failover
	shows.shows = propertytest.Exclusivity
	shows.kind = &clusterKind{name: "test"} // a lab cell's result says its stated outcome
	p := newProgress(&bytes.Buffer{}, []cell{shows}, cfg)
	got := runCell(&shows, cfg, 0, p)
	ex := got.Props[0]
	if !got.Shown || ex.Expected != 1 || got.Runs >= cfg.runs || got.Stated != "exclusivity expected" {
		t.Fatalf("stated %q, shown %v, in %d runs of %d, exclusivity %+v: want it shown once, before the last run",
			got.Stated, got.Shown, got.Runs, cfg.runs, ex)
	}
	t.Logf("shown in run %d", got.Runs)
	batch := func(runs int) int {
		cfg.runs = runs
		r := runCell(&failover, cfg, 0, p)
		if r.Runs != runs || r.Stated != "" {
			t.Fatalf("a cell not stated to show anything made %d runs of %d, stated %q", r.Runs, runs, r.Stated)
		}
		return r.Props[0].Expected
	}
	if n := batch(got.Runs); n == 0 {
		t.Errorf("%d runs at once showed no violation; one at a time, the last did", got.Runs)
	}
	if got.Runs < 2 {
		t.Fatalf("shown in run %d: this seed no longer tells one run at a time from a batch", got.Runs)
	}
	if n := batch(got.Runs - 1); n != 0 {
		t.Errorf("%d runs at once showed %d violations; one at a time, none before run %d", got.Runs-1, n, got.Runs)
	}
}

// The stated outcome of each cell on a cluster is printed after the
// table, with what came of it.
func TestPrintStated(t *testing.T) {
	res := checkResult{Cells: []cellResult{
		{Lock: "a", Faults: "leader", Stated: statedPass, Shown: true, Runs: 3},
		{Lock: "b", Faults: "failover", Stated: "exclusivity expected", Shown: true, Runs: 2},
		{Lock: "c", Faults: "skew", Stated: "exclusivity expected", Runs: 3},
		{Lock: "d", Faults: "leader", Stated: statedPass, Violated: true, Runs: 1},
		{Lock: "e", Faults: "leader", Stated: statedPass, Error: "starting the e cluster: no leader"},
		{Lock: "f", Faults: "crash"}, // not on a cluster: nothing stated
	}}
	var b bytes.Buffer
	printStated(&b, res)
	for _, want := range []string{
		"a/leader: no claimed property violated: as stated, in 3 runs",
		"b/failover: exclusivity expected: shown, in run 2",
		"c/skew: exclusivity expected: not shown in 3 runs",
		"d/leader: no claimed property violated: NOT as stated",
		"e/leader: no claimed property violated: not checked: starting the e cluster: no leader",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "f/crash") {
		t.Errorf("a cell with nothing stated is listed:\n%s", b.String())
	}
}

// A re-checked history is printed with its verdict; one found Ok (a named
// check's finding, as a paused holder's on redlock/restart in CI) gets the
// finding's detail under it, and an Illegal one does not.
func TestPrintRechecks(t *testing.T) {
	res := checkResult{Cells: []cellResult{
		{Lock: "redlock", Faults: "restart", Violations: []violationOut{{Property: "exclusivity", Unclaimed: []string{"a holder paused (pause)"},
			Detail: "client 2 worked on after its lease ran out", Recheck: "lockproof history r.json", Verdict: "Ok", Rechecked: "Ok"}}},
		{Lock: "redislock", Faults: "failover", Violations: []violationOut{{Property: "exclusivity", Unclaimed: []string{"failover"},
			Detail: "two holders", Recheck: "lockproof history f.json", Verdict: "Illegal", Rechecked: "Illegal"}}},
	}}
	var b strings.Builder
	printRechecks(&b, res)
	got := b.String()
	for _, want := range []string{
		"redlock/restart: exclusivity expected (under a holder paused (pause), not claimed); lockproof history r.json: Ok\n" +
			"  the history alone is within the model: the finding is the run's own check: client 2 worked on after its lease ran out\n",
		"redislock/failover: exclusivity expected (under failover, not claimed); lockproof history f.json: Illegal\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "two holders") {
		t.Errorf("an Illegal history's detail printed:\n%s", got)
	}
}
