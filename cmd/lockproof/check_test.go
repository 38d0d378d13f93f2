package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// splitBrain gives every client a lock of its own, as a process-local mutex
// does across processes: two clients hold "the" lock at once.
func splitBrain() cell {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return cell{lock: "split-brain", faults: "crash", about: "every client has its own in-memory lock",
		factory: func(propertytest.Env) (*propertytest.Backend, error) {
			clock := fakes.NewClock(epoch)
			return &propertytest.Backend{
				NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
					return fakes.NewMemLock(name, append([]locks.Option{locks.WithClock(clock)}, opts...)...)
				},
				Clock: clock, Advance: clock.Advance, InProcess: true,
			}, nil
		}}
}

func quickConfig(t *testing.T) checkConfig {
	return checkConfig{seed: 99, runs: 3, chunk: 5, steps: 30, outDir: t.TempDir(), shrink: 2 * time.Second}
}

func TestCheckPassesRedisLock(t *testing.T) {
	var out, errOut bytes.Buffer
	html := filepath.Join(t.TempDir(), "report.html")
	code := run([]string{"check", "-locks", "redislock", "-faults", "crash,failover", "-runs", "4", "-seed", "5", "-json", "-html", html}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	var res checkResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	if res.Seed != 5 || res.Verdict != statusPass || len(res.Cells) != 2 {
		t.Fatalf("seed %d verdict %s cells %d", res.Seed, res.Verdict, len(res.Cells))
	}
	for _, c := range res.Cells {
		if c.Runs != 4 || c.Violated || c.Error != "" {
			t.Errorf("%s/%s: runs %d violated %v error %q", c.Lock, c.Faults, c.Runs, c.Violated, c.Error)
		}
		if c.Props[0].Property != string(propertytest.Exclusivity) || c.Props[0].Status == statusNotChecked {
			t.Errorf("%s/%s: exclusivity %+v", c.Lock, c.Faults, c.Props[0])
		}
	}
	if !strings.Contains(errOut.String(), "[2/2] redislock/failover") {
		t.Errorf("no progress lines on stderr:\n%s", errOut.String())
	}
	if b, err := os.ReadFile(html); err != nil || !bytes.Contains(b, []byte("lockproof check: pass")) {
		t.Errorf("report %s: %v", html, err)
	}
}

func TestCheckCatchesABrokenLock(t *testing.T) {
	cfg := quickConfig(t)
	cfg.shrink = time.Minute // a backstop the minimization never reaches, even under -race on a loaded machine
	cfg.steps = 10           // the split brain shows in a short run, and every shrink candidate is one
	cells := []cell{splitBrain()}
	cells[0].opts.ShrinkRuns = 20 // what the test reads shows in any failing run; 200 candidates cost 4 s
	var progressOut bytes.Buffer
	res := runMatrix(cells, cfg, newProgress(&progressOut, cells, cfg))
	if res.Exit != exitIllegal || res.Verdict != statusViolated {
		t.Fatalf("a split-brain lock passed: exit %d verdict %s", res.Exit, res.Verdict)
	}
	c := res.Cells[0]
	if !c.Violated || c.Props[0].Status != statusViolated || c.Seed>>48 != uint64(cells[0].id()) {
		t.Fatalf("cell %+v: want exclusivity VIOLATED with a seed naming the cell %#x", c, cells[0].id())
	}
	if c.Replay != "lockproof replay "+strconv.FormatUint(c.Seed, 10) || len(c.Violations) == 0 || c.Violations[0].File == "" {
		t.Fatalf("no replay command or history file: %+v", c)
	}
	if b, err := os.ReadFile(c.Log); err != nil || !bytes.Contains(b, []byte("exclusivity")) {
		t.Errorf("the runs' log %q (%v) does not name the violation:\n%s", c.Log, err, b)
	}
	var table bytes.Buffer
	printTable(&table, res)
	for _, want := range []string{"VIOLATED (seed " + strconv.FormatUint(c.Seed, 10) + ")", "verdict: VIOLATED", c.Replay, "the runs' log: " + c.Log} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	path := filepath.Join(t.TempDir(), "report.html")
	if err := writeReport(path, res); err != nil {
		t.Fatal(err)
	}
	checkInBrowser(t, path, 1)
}

// checkInBrowser opens the report in headless Chromium and asks the page
// what it drew: the timelines' operation bars, and no script error.
func checkInBrowser(t *testing.T, path string, wantTimelines int) {
	t.Helper()
	bin := os.Getenv("LOCKPROOF_CHROMIUM")
	if bin == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				bin = p
				break
			}
		}
	}
	if bin == "" {
		t.Skip("no Chromium found (install Debian's chromium, or set LOCKPROOF_CHROMIUM): the report was not checked in a browser")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", "file://"+abs)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	body := regexp.MustCompile(`<body[^>]*>`).Find(dom)
	attr := func(name string) int {
		m := regexp.MustCompile(name + `="(\d+)"`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("the page did not set %s: its script did not run (body: %s)", name, body)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	if n := attr("data-script-errors"); n != 0 {
		t.Errorf("%d script errors in the report", n)
	}
	frames, drawn := attr("data-timelines"), attr("data-timelines-drawn")
	if frames < wantTimelines || drawn != frames {
		t.Errorf("%d timelines, %d drawn; want at least %d, all drawn", frames, drawn, wantTimelines)
	}
	n, hidden, outside, overlapping := attr("data-bars"), attr("data-bars-hidden"), attr("data-bars-outside"), attr("data-bars-overlapping")
	if hidden+outside+overlapping != 0 {
		t.Errorf("of %d operation bars, %d have no area, %d leave their lane, %d pairs are drawn over each other", n, hidden, outside, overlapping)
	}
	t.Logf("Chromium drew %d of %d timelines (%d bars, each visible, inside its lane, none over another), no script errors", drawn, frames, n)
}

func TestCheckBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"check", "-locks", "nosuchlock"},
		{"check", "-faults", "meteor"},
		{"check", "-budget", "0"},
		{"check", "-runs", "-1"},
		{"check", "stray"},
		{"check", "-zk", "nohostport"},
		{"replay"},
		{"replay", "banana"},
		{"replay", "1"}, // names no cell
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != exitUsage || errOut.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut.String())
		}
	}
}

// A cell's seeds carry its id, whatever the matrix seed and chunk.
func TestCellSeedNamesTheCell(t *testing.T) {
	// The real-server cells too: their ids must differ from the embedded
	// cells of the same name, so that a seed names the backend as well.
	real := endpoints{redis: "r:1", redisNodes: []string{"a:1", "b:1", "c:1"}, etcd: []string{"http://e:1"}, consul: "c:1", mysql: "m@tcp(m:1)/", zk: "z:1"}
	cells := append(allCells(endpoints{}), builtinCells(real)...)
	ids := map[uint16]string{}
	for i := range cells {
		c := &cells[i]
		name := c.name()
		if c.real {
			name += " (real)"
		}
		if other, dup := ids[c.id()]; dup {
			t.Fatalf("cells %s and %s share id %#x", other, name, c.id())
		}
		ids[c.id()] = name
		for _, matrix := range []uint64{1, 1<<40 - 1, 1 << 63} {
			for _, k := range []int{0, 1, 1000} {
				if s := cellSeed(c, matrix, k); s>>48 != uint64(c.id()) || s == 0 {
					t.Errorf("cellSeed(%s, %d, %d) = %#x", c.name(), matrix, k, s)
				}
			}
		}
	}
}

// A mutant put into the matrix makes check exit 1 with the mutant's
// property VIOLATED, and the seed it prints replays the failure.
func TestCheckCatchesAMutantAndReplaysIt(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"check", "-locks", "redislock,mutant/grant-without-check", "-faults", "crash,mutant",
		"-runs", "5", "-seed", "11", "-json", "-html", "", "-histories", t.TempDir()}
	if code := run(args, &out, &errOut); code != exitIllegal {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitIllegal, out.String(), errOut.String())
	}
	var res checkResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("-json output: %v\n%s", err, out.String())
	}
	if n := recheckHistories(t, res); n == 0 {
		t.Error("no violation's history was written")
	}
	if len(res.Cells) != 2 || res.Verdict != statusViolated {
		t.Fatalf("verdict %s, %d cells", res.Verdict, len(res.Cells))
	}
	if c := res.Cells[0]; c.Lock != "redislock" || c.Violated {
		t.Errorf("the correct lock's cell: %+v", c)
	}
	m := res.Cells[1]
	if m.Lock != "mutant/grant-without-check" || !m.Violated || m.Mutant != string(propertytest.Exclusivity) ||
		m.Props[0].Status != statusViolated {
		t.Fatalf("the mutant's cell: %+v", m)
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"replay", "-histories", t.TempDir(), strconv.FormatUint(m.Seed, 10)}, &out, &errOut); code != exitIllegal {
		t.Fatalf("replay %d: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", m.Seed, code, exitIllegal, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "reproduced: VIOLATED") || !strings.Contains(out.String(), "exclusivity") {
		t.Errorf("replay output:\n%s", out.String())
	}
	// Bounded by count as check prints it when its wall-time bound cut the
	// minimization short: 0 candidates (the failing run as found), or a
	// few; two replays so bounded write the same history. A replay bounded
	// to a few candidates takes about 8 s here (rapid goes on offering
	// candidates the suite refuses), so that pair runs with
	// LOCKPROOF_DEEP=1.
	bounds := []string{"0"}
	if suitemain.Deep() {
		bounds = append(bounds, "3")
	}
	for _, n := range bounds {
		var files []string
		for range 2 {
			out.Reset()
			errOut.Reset()
			dir := t.TempDir()
			if code := run([]string{"replay", "-shrinkruns", n, "-histories", dir, strconv.FormatUint(m.Seed, 10)}, &out, &errOut); code != exitIllegal {
				t.Fatalf("replay -shrinkruns %s %d: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", n, m.Seed, code, exitIllegal, out.String(), errOut.String())
			}
			names, err := filepath.Glob(filepath.Join(dir, "*.json"))
			if err != nil || len(names) == 0 {
				t.Fatalf("replay -shrinkruns %s wrote no history (%v)", n, err)
			}
			b, err := os.ReadFile(names[0])
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, string(b))
		}
		if files[0] != files[1] {
			t.Errorf("two replays with -shrinkruns %s wrote different histories", n)
		}
	}
}

// A real server that does not answer: the cause is printed, and check exits
// with the status it documents for an error.
func TestCheckSaysWhyABackendDidNotStart(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"check", "-redis", "127.0.0.1:1", "-locks", "redislock", "-faults", "crash", "-runs", "1", "-html", ""}, &out, &errOut)
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	for name, s := range map[string]string{"stdout": out.String(), "stderr": errOut.String()} {
		if !strings.Contains(s, "connection refused") || !strings.Contains(s, "ERROR") {
			t.Errorf("%s does not give the error and its cause:\n%s", name, s)
		}
		if strings.Contains(s, "failed without a violation") {
			t.Errorf("%s lost the cause:\n%s", name, s)
		}
	}
}

// recheckHistories runs every violation's recheck command (lockproof
// history on its -histories file) and fails t unless it exits with the
// status of the verdict check found on that history. It returns how many it
// ran.
func recheckHistories(t *testing.T, res checkResult) int {
	t.Helper()
	exits := map[string]int{"Ok": exitOK, "Illegal": exitIllegal, "Unknown": exitUnknown}
	n := 0
	for _, c := range res.Cells {
		for _, v := range c.Violations {
			want, known := exits[v.Verdict]
			args := strings.Fields(v.Recheck)
			if !known || len(args) < 3 || args[0] != "lockproof" || args[len(args)-1] != v.File {
				t.Errorf("%s: %s: verdict %q, recheck %q, file %q", c.Lock, v.Property, v.Verdict, v.Recheck, v.File)
				continue
			}
			var out, errOut bytes.Buffer
			if code := run(args[1:], &out, &errOut); code != want {
				t.Errorf("%s: %s: %s exits %d, want %d (%s)\n%s%s", c.Lock, v.Property, v.Recheck, code, want, v.Verdict, out.String(), errOut.String())
			}
			n++
		}
	}
	return n
}

// Every mutant's violations are written with -histories, and lockproof
// history on each file gives the verdict check found on it again: Illegal
// for a history the lease model rejects, Ok for a named check's finding
// the model cannot see. About 4 minutes on 2 cores: LOCKPROOF_DEEP=1 only.
func TestCheckMutantsHistoriesCheckAgain(t *testing.T) {
	if !suitemain.Deep() {
		t.Skip("LOCKPROOF_DEEP=1 runs every mutant")
	}
	var out, errOut bytes.Buffer
	args := []string{"check", "-locks", "mutants", "-faults", "mutant", "-runs", "3", "-seed", "3", "-json", "-html", "", "-histories", t.TempDir()}
	if code := run(args, &out, &errOut); code != exitIllegal {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", code, exitIllegal, errOut.String())
	}
	var res checkResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("-json output: %v", err)
	}
	verdicts := map[string]int{}
	for _, c := range res.Cells {
		for _, v := range c.Violations {
			verdicts[v.Verdict]++
		}
	}
	n := recheckHistories(t, res)
	if verdicts["Ok"] == 0 || verdicts["Illegal"] == 0 {
		t.Errorf("want violations resting on Ok and on Illegal histories, got %v", verdicts)
	}
	t.Logf("%d histories checked again: %v", n, verdicts)
}

// zklock has a network cell on minizk that claims partitions (and not the
// holder's session expired at once), and none on a real server, whose
// sessions cannot be partitioned through proxies; the cell runs.
func TestZKNetworkCell(t *testing.T) {
	var network []cell
	for _, c := range builtinCells(endpoints{}) {
		if c.lock == lockZK && c.faults == "network" {
			network = append(network, c)
		}
	}
	if len(network) != 1 || claimsOf(network[0].opts) != "crash, pause, partition" {
		t.Fatalf("zklock network cells on minizk: %d; claims %q", len(network), claimsOf(network[0].opts))
	}
	for _, c := range builtinCells(endpoints{zk: "z:1"}) {
		if c.lock == lockZK && !c.real {
			t.Errorf("with -zk, a cell on minizk: %s", c.name())
		}
	}
	cfg := quickConfig(t)
	cfg.runs = 2
	res := runMatrix(network, cfg, newProgress(&bytes.Buffer{}, network, cfg))
	if c := res.Cells[0]; c.Runs != 2 || c.Violated || c.Error != "" || c.Claims != "crash, pause, partition" {
		t.Fatalf("zklock/network: runs %d violated %v error %q claims %q", c.Runs, c.Violated, c.Error, c.Claims)
	}
}

// The semaphores are selected by name or by their group, never by
// default; through check, their cells run and pass with 2 permits.
func TestCheckSemaphoreRows(t *testing.T) {
	def, err := selectCells(endpoints{}, false, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range def {
		if c.group == groupSemaphores {
			t.Fatalf("the default matrix has %s", c.name())
		}
	}
	all, err := selectCells(endpoints{}, false, groupSemaphores, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range all {
		names = append(names, c.lock)
		if c.opts.Permits != semaphorePermits {
			t.Errorf("%s runs with %d permits", c.name(), c.opts.Permits)
		}
	}
	if want := []string{"redis-semaphore", "etcd-semaphore", "consul-semaphore", "zk-semaphore"}; !slices.Equal(names, want) {
		t.Fatalf("-locks semaphores selects %v, want %v", names, want)
	}
	// The embedded etcd runs in real time (about 8 s a run): its cell is
	// left to lockproof check itself.
	var out, errOut bytes.Buffer
	args := []string{"check", "-locks", "redis-semaphore,consul-semaphore,zk-semaphore", "-runs", "3", "-seed", "23", "-json", "-html", ""}
	if code := run(args, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	var res checkResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("-json output: %v\n%s", err, out.String())
	}
	if len(res.Cells) != 3 || res.Verdict != statusPass {
		t.Fatalf("verdict %s, %d cells", res.Verdict, len(res.Cells))
	}
	for _, c := range res.Cells {
		if c.Runs != 3 || c.Violated || c.Error != "" {
			t.Errorf("%s: runs %d, violated %v, error %q", c.Lock, c.Runs, c.Violated, c.Error)
		}
	}
}

// The read-write locks are selected by name or by their group, never by
// default; through check, a cell runs with readers and writers and passes.
func TestCheckRWLockRows(t *testing.T) {
	def, err := selectCells(endpoints{}, false, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range def {
		if c.group == groupRWLocks {
			t.Fatalf("the default matrix has %s", c.name())
		}
	}
	all, err := selectCells(endpoints{}, false, groupRWLocks, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range all {
		names = append(names, c.lock)
		if !c.opts.ReadWrite {
			t.Errorf("%s runs without readers", c.name())
		}
	}
	if want := []string{"redis-rwmutex", "etcd-rwmutex", "consul-rwmutex", "zk-rwmutex"}; !slices.Equal(names, want) {
		t.Fatalf("-locks rwlocks selects %v, want %v", names, want)
	}
	// The embedded etcd runs in real time: its cell is left to lockproof
	// check itself.
	var out, errOut bytes.Buffer
	args := []string{"check", "-locks", "redis-rwmutex", "-runs", "5", "-seed", "29", "-json", "-html", ""}
	if code := run(args, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	var res checkResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("-json output: %v\n%s", err, out.String())
	}
	if len(res.Cells) != 1 || res.Verdict != statusPass {
		t.Fatalf("verdict %s, %d cells", res.Verdict, len(res.Cells))
	}
	if c := res.Cells[0]; c.Runs != 5 || c.Violated || c.Error != "" {
		t.Errorf("%s: runs %d, violated %v, error %q", c.Lock, c.Runs, c.Violated, c.Error)
	}
}

// The re-entrant cells are selected by name or by their group, never by
// default, each with an owner per client; through check, one runs and
// passes.
func TestCheckReentrantRows(t *testing.T) {
	def, err := selectCells(endpoints{}, false, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range def {
		if c.group == groupReentrant || c.opts.Reentrant {
			t.Fatalf("the default matrix has %s", c.name())
		}
	}
	all, err := selectCells(endpoints{}, false, groupReentrant, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 6 {
		t.Fatalf("-locks reentrant selects %d cells, want one per built-in lock (6)", len(all))
	}
	for _, c := range all {
		if !c.opts.Reentrant {
			t.Errorf("%s runs without owners", c.name())
		}
	}
	var out, errOut bytes.Buffer
	args := []string{"check", "-locks", "redislock-reentrant", "-runs", "5", "-seed", "31", "-json", "-html", ""}
	if code := run(args, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	var res checkResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("-json output: %v\n%s", err, out.String())
	}
	if len(res.Cells) != 1 || res.Verdict != statusPass || res.Cells[0].Runs != 5 {
		t.Fatalf("verdict %s, %d cells: %+v", res.Verdict, len(res.Cells), res.Cells)
	}
}
