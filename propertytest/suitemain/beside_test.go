package suitemain

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestMain's Beside runs this test in a second process, a child of the
// first; Main runs it in the first when the command line selects tests.
func TestBesideRunsApart(t *testing.T) {
	parent := os.Getenv(envBeside)
	if parent == "" {
		if len(beside) > 0 {
			t.Fatal("ran in the first process, beside a second one")
		}
		t.Skip("Main runs every test in this process (the command line selects tests, or not on Linux)")
	}
	if want := strconv.Itoa(os.Getppid()); parent != want {
		t.Fatalf("%s=%s, want the parent's pid %s", envBeside, parent, want)
	}
}

// The first process started one process per Beside exactly when the
// command line allows it, and collects them here.
func TestCollect(t *testing.T) {
	if os.Getenv(envBeside) == "" && besideWanted(commandLineFlags(os.Args[1:])) != (len(beside) > 0) {
		t.Fatalf("flags %v: other processes started: %v, want %v", os.Args[1:], len(beside) > 0, besideWanted(commandLineFlags(os.Args[1:])))
	}
	Collect(t)
	if len(beside) > 0 && (len(beside) != 2 || beside[0].cmd.Process.Pid == beside[1].cmd.Process.Pid) {
		t.Errorf("%d processes beside this one, want 2 of their own", len(beside))
	}
}

// The second Beside of TestMain runs this test in a process of its own.
func TestBesideRunsApartToo(t *testing.T) { TestBesideRunsApart(t) }

// Selecting tests, profiles, benchmarks or a list keeps every test in one
// process; the flags of go test's plain runs, and other packages', do not.
func TestBesideWanted(t *testing.T) {
	if !besideSupported {
		t.Skip("no second process off Linux")
	}
	t.Setenv(envBeside, "") // as in a first process
	for _, given := range [][]string{
		nil,
		{"test.v", "test.timeout", "test.paniconexit0", "test.testlogfile", "test.count"},
		{"rapid.checks", "mutants.realtime", "test.short", "test.shuffle"},
	} {
		if !besideWanted(set(given...)) {
			t.Errorf("%v: no second process", given)
		}
	}
	for _, name := range []string{"test.run", "test.skip", "test.list", "test.bench", "test.fuzz", "test.cpuprofile", "test.coverprofile", "test.trace"} {
		if besideWanted(set("test.v", name)) {
			t.Errorf("-%s: a second process", name)
		}
	}
	t.Setenv(envBeside, "1")
	if besideWanted(nil) {
		t.Error("a second process would start a third")
	}
}

// The second process gets the flags given on the command line only (Main
// sets its defaults again there), its own test log, -run of the pattern,
// and a shorter timeout.
func TestBesideArgs(t *testing.T) {
	for name, v := range map[string]string{"test.run": "^TestOld$", "test.timeout": "10m0s", "test.count": "2", "rapid.steps": "9"} {
		f := flag.Lookup(name)
		old := f.Value.String()
		if err := f.Value.Set(v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Value.Set(old) })
	}
	args := besideArgs(set("test.run", "test.timeout", "test.count", "test.testlogfile", "rapid.steps"), "^TestX$", "/tmp/x.log")
	want := []string{"-rapid.steps=9", "-test.count=2", "-test.timeout=9m30s", "-test.run=^TestX$", "-test.testlogfile=/tmp/x.log"}
	if !slices.Equal(args, want) {
		t.Errorf("args %q, want %q", args, want)
	}
	if args := besideArgs(set("test.timeout"), "X", ""); !slices.Equal(args, []string{"-test.timeout=9m30s", "-test.run=X"}) {
		t.Errorf("without a test log: %q", args)
	}
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// The whole process's verdict goes; a test's lines stay.
func TestDropVerdict(t *testing.T) {
	for in, want := range map[string]string{
		"=== RUN   TestX\n--- PASS: TestX (0.00s)\nPASS\n": "=== RUN   TestX\n--- PASS: TestX (0.00s)\n",
		"--- FAIL: TestX (0.00s)\nFAIL\n":                  "--- FAIL: TestX (0.00s)\n",
		"\x16=== RUN   TestX\n\x16PASS\n":                  "\x16=== RUN   TestX\n",
		"PASS":                                             "",
		"panic: boom\n":                                    "panic: boom\n",
		"":                                                 "",
	} {
		if got := string(dropVerdict([]byte(in))); got != want {
			t.Errorf("dropVerdict(%q) = %q, want %q", in, got, want)
		}
	}
}

// A test log's entries come back in order, relative names made absolute
// after a chdir; a file that is not a test log is refused.
func TestReplayLines(t *testing.T) {
	var got []string
	err := replayLines(strings.NewReader("# test log\ngetenv LOCKPROOF_DEEP\nopen testdata/a\nchdir /tmp\nstat b\nopen /abs/c\nnewkind x\n"),
		func(op, name string) { got = append(got, op+" "+name) })
	want := []string{"getenv LOCKPROOF_DEEP", "open testdata/a", "stat /tmp/b", "open /abs/c"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"getenv X\n", "# test log\ngetenv\n"} {
		if err := replayLines(strings.NewReader(bad), func(string, string) {}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// collect shows the second process's output without its verdict and
// fails the test when the process failed or ran no test.
func TestCollectReports(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		fails        bool
		says         string
	}{
		{"passed", `printf -- '--- PASS: TestX (1.00s)\nPASS\n'`, false, "ran in a second process"},
		{"failed", `printf -- '--- FAIL: TestX (1.00s)\nFAIL\n'; exit 1`, true, "failed: exit status 1"},
		{"none ran", `printf 'testing: warning: no tests to run\nPASS\n'`, true, "matches no test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := os.CreateTemp(t.TempDir(), "out")
			if err != nil {
				t.Fatal(err)
			}
			b := &besideRun{pattern: "^TestX$", out: out, cmd: exec.Command("sh", "-c", tc.script)}
			b.cmd.Stdout = out
			if err := b.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var r recorder
			var w bytes.Buffer
			b.collect(&r, &w)
			if r.failed != tc.fails || !strings.Contains(r.said, tc.says) {
				t.Errorf("failed %v, said %q; want failed %v saying %q", r.failed, r.said, tc.fails, tc.says)
			}
			if strings.Contains(w.String(), "PASS\n") && !strings.Contains(w.String(), "--- PASS") || strings.HasSuffix(w.String(), "FAIL\n") {
				t.Errorf("the verdict was shown: %q", w.String())
			}
			if _, err := os.Stat(out.Name()); !os.IsNotExist(err) {
				t.Errorf("the output file is left: %v", err)
			}
		})
	}
}

// A second process's test log is replayed here; one that cannot be read
// fails the test.
func TestCollectReplaysTheLog(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "test.log")
	if err := os.WriteFile(log, []byte("# test log\ngetenv HOME\nopen "+filepath.Join(dir, "missing")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		log   string
		fails bool
	}{{log, false}, {filepath.Join(dir, "nolog"), true}} {
		out, err := os.CreateTemp(dir, "out")
		if err != nil {
			t.Fatal(err)
		}
		b := &besideRun{pattern: "X", out: out, testLog: tc.log, cmd: exec.Command("true")}
		if err := b.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var r recorder
		b.collect(&r, &bytes.Buffer{})
		if r.failed != tc.fails {
			t.Errorf("log %s: failed %v, said %q", tc.log, r.failed, r.said)
		}
	}
}

// recorder is a reporter that keeps what it was told.
type recorder struct {
	failed bool
	said   string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.said += fmt.Sprintf(format, args...) + "\n"
}

func (r *recorder) Logf(format string, args ...any) { r.said += fmt.Sprintf(format, args...) + "\n" }

// A pattern with a / (a subtest's) or that does not compile is refused
// before any process starts.
func TestBesideRefusesBadPatterns(t *testing.T) {
	for _, p := range []string{"TestA/sub", "Test("} {
		if b, err := startBeside(p, nil); err == nil {
			b.stop()
			t.Errorf("Beside(%q) started", p)
		}
	}
}

// The flags of a command line are found in every form the flag package
// takes; flags set by a TestMain are not among them.
func TestCommandLineFlags(t *testing.T) {
	got := commandLineFlags([]string{"-test.v=test2json", "--test.count", "2", "-test.short", "-rapid.checks=3", "-test.timeout", "1m", "--", "-test.run=x"})
	want := set("test.v", "test.count", "test.short", "rapid.checks", "test.timeout")
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := commandLineFlags([]string{"-test.short", "stray", "-test.run=x"}); !maps.Equal(got, set("test.short")) {
		t.Errorf("after a stray argument: %v", got)
	}
}
