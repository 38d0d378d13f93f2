package suitemain

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// envBeside marks the second process Beside starts; its value is the
// parent's process id.
const envBeside = "LOCKPROOF_SUITEMAIN_BESIDE"

// Beside makes Main run the top-level tests whose names match pattern (a
// regular expression, as -run takes it for a top-level name, so without
// "/") in a second process of the same test binary, started before the
// other tests run and collected by the package's test that calls Collect:
// their output is shown there, and their failure fails it. Each Beside
// starts a process of its own; their patterns must not match the same
// test, which would run twice.
//
// It is for tests that keep real time and mostly wait (an embedded etcd's
// leases, a scheduler's wall-time limits) in a package whose other tests
// need the process to themselves: the suite's scheduler decides
// quiescence for the whole process, so the two kinds cannot run side by
// side in one process, and go test runs only as many test binaries at
// once as there are CPUs. In a second process the waits overlap the other
// tests' work.
//
// Main runs every test in its own process, as usual, when the command line
// selects tests or asks for profiles, benchmarks, fuzzing or a list (-run,
// -skip, -list, -bench, -fuzz, -cpuprofile and the like), or off Linux
// (the second process must die with the first). A package with Beside
// must have a test that calls Collect; Main fails the package otherwise.
func Beside(pattern string) Option {
	return func(c *config) { c.beside = append(c.beside, pattern) }
}

// besideFlags are the testing flags a second process may take over from
// the command line; any other testing flag given keeps every test in the
// first process. Flags of other packages (rapid's, the tests' own) are
// passed on as given.
var besideFlags = map[string]bool{
	"test.v": true, "test.timeout": true, "test.count": true, "test.paniconexit0": true,
	"test.parallel": true, "test.short": true, "test.failfast": true, "test.testlogfile": true,
	"test.gocoverdir": true, "test.fullpath": true, "test.shuffle": true, "test.cpu": true,
}

// besideWanted reports whether Main starts a second process, given the
// names of the flags on the command line.
func besideWanted(given map[string]bool) bool {
	if !besideSupported || os.Getenv(envBeside) != "" {
		return false
	}
	for name := range given {
		if strings.HasPrefix(name, "test.") && !besideFlags[name] {
			return false
		}
	}
	return true
}

// besideArgs returns the second process's arguments: the flags given on
// the command line (given: by name; values as they are now), its own
// test log, -run pattern, and a timeout a little shorter than the first
// process's, so that a hung test is reported by the second process, with
// its goroutines, before the first one's alarm goes off.
func besideArgs(given map[string]bool, pattern, testLog string) []string {
	var args []string
	flag.VisitAll(func(f *flag.Flag) {
		switch {
		case !given[f.Name] || f.Name == "test.testlogfile" || f.Name == "test.run" || f.Name == "test.skip":
		case f.Name == "test.timeout":
			d, err := time.ParseDuration(f.Value.String())
			if err == nil && d > 0 {
				d -= min(d/10, 30*time.Second)
			}
			args = append(args, "-test.timeout="+d.String())
		default:
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	args = append(args, "-test.run="+pattern)
	if testLog != "" {
		args = append(args, "-test.testlogfile="+testLog)
	}
	return args
}

// besideRun is a process Main started beside this one.
type besideRun struct {
	pattern   string
	cmd       *exec.Cmd
	out       *os.File // its standard output and error
	testLog   string   // its test log's path, or ""
	collected bool
}

// beside holds the second processes of this test binary, one per Beside,
// if Main started them.
var beside []*besideRun

// startBeside starts a second process: this binary, with the flags given
// and -run pattern. When go test asked for a test log (its record of what
// the tests read, for its cache), the second process writes one of its
// own, which Collect replays here.
func startBeside(pattern string, given map[string]bool) (*besideRun, error) {
	if strings.Contains(pattern, "/") {
		return nil, fmt.Errorf("suitemain: Beside(%q): a pattern of top-level test names has no /", pattern)
	}
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, fmt.Errorf("suitemain: Beside(%q): %v", pattern, err)
	}
	out, err := os.CreateTemp("", "suitemain-beside-*.out")
	if err != nil {
		return nil, fmt.Errorf("suitemain: Beside: %v", err)
	}
	b := &besideRun{pattern: pattern, out: out}
	if f := flag.Lookup("test.testlogfile"); f != nil && f.Value.String() != "" {
		b.testLog = out.Name() + ".log"
	}
	b.cmd = exec.Command(os.Args[0], besideArgs(given, pattern, b.testLog)...)
	b.cmd.Env = append(os.Environ(), envBeside+"="+strconv.Itoa(os.Getpid()))
	b.cmd.Stdout, b.cmd.Stderr = out, out
	b.cmd.SysProcAttr = besideProcAttr()
	if err := b.cmd.Start(); err != nil {
		b.remove()
		return nil, fmt.Errorf("suitemain: Beside: starting %s: %v", os.Args[0], err)
	}
	return b, nil
}

// remove deletes the second process's files.
func (b *besideRun) remove() {
	_ = b.out.Close()
	_ = os.Remove(b.out.Name())
	if b.testLog != "" {
		_ = os.Remove(b.testLog)
	}
}

// stop ends a second process nobody collected (see Main).
func (b *besideRun) stop() {
	_ = b.cmd.Process.Kill()
	_ = b.cmd.Wait()
	b.remove()
}

// Collect waits for the tests Beside runs in other processes, writes
// their output and fails t if they failed or none ran. Call it from one
// test of the package; that test runs in parallel (t.Parallel), so its
// wait comes after the package's other tests. It skips t where there is
// no other process: Main ran every test in this process, or this is one
// of the others.
func Collect(t *testing.T) {
	t.Helper()
	if len(beside) == 0 || beside[0].collected {
		t.Skip("suitemain: no second process to collect: the tests of Beside, if any, run in this process")
	}
	for _, b := range beside {
		b.collected = true
	}
	t.Parallel()
	for _, b := range beside {
		b.collect(t, os.Stdout)
	}
}

// startAllBeside starts a process for each pattern and has this one skip
// what they run; on an error it stops those it started.
func startAllBeside(patterns []string, given map[string]bool) ([]*besideRun, error) {
	var runs []*besideRun
	stop := func() {
		for _, b := range runs {
			b.stop()
		}
	}
	for _, p := range patterns {
		b, err := startBeside(p, given)
		if err != nil {
			stop()
			return nil, err
		}
		runs = append(runs, b)
	}
	if err := flag.Set("test.skip", "("+strings.Join(patterns, ")|(")+")"); err != nil {
		stop()
		return nil, fmt.Errorf("suitemain: Beside: -test.skip: %v", err)
	}
	return runs, nil
}

// reporter is what collect needs of a test.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// collect waits for the second process, replays its test log, writes its
// output to w without its last line (the PASS or FAIL of the whole
// process: the first process writes its own) and reports to t.
func (b *besideRun) collect(t reporter, w io.Writer) {
	t.Helper()
	err := b.cmd.Wait()
	defer b.remove()
	if b.testLog != "" {
		if rerr := replayTestLog(b.testLog); rerr != nil {
			t.Errorf("suitemain: the second process's test log: %v", rerr)
		}
	}
	out, rerr := os.ReadFile(b.out.Name())
	if rerr != nil {
		t.Errorf("suitemain: the second process's output: %v", rerr)
	}
	_, _ = w.Write(dropVerdict(out))
	switch {
	case err != nil:
		t.Errorf("suitemain: the tests matching %q, run in a second process (pid %d), failed: %v; their output is above",
			b.pattern, b.cmd.Process.Pid, err)
	case bytes.Contains(out, []byte("testing: warning: no tests to run")):
		t.Errorf("suitemain: Beside(%q) matches no test of the package", b.pattern)
	default:
		t.Logf("the tests matching %q ran in a second process (pid %d)", b.pattern, b.cmd.Process.Pid)
	}
}

// dropVerdict returns out without its last line when that line is the
// test binary's verdict, PASS or FAIL (after test2json's marker, if any).
func dropVerdict(out []byte) []byte {
	body := bytes.TrimSuffix(out, []byte("\n"))
	i := bytes.LastIndexByte(body, '\n') + 1
	switch string(bytes.TrimPrefix(body[i:], []byte("\x16"))) {
	case "PASS", "FAIL":
		return out[:i]
	}
	return out
}

// replayTestLog makes, in this process, the reads the second process's
// test log records (the environment variables it looked up, the files it
// opened or examined), so that this process's own log, from which go test
// decides whether a cached result still holds, has them too.
func replayTestLog(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return replayLines(f, func(op, name string) {
		switch op {
		case "getenv":
			os.Getenv(name)
		case "stat":
			_, _ = os.Stat(name)
		case "open":
			if g, err := os.Open(name); err == nil {
				_ = g.Close()
			}
		}
	})
}

// replayLines calls do for each entry of a test log (cmd/go's format: a
// header line, then "op name" lines), with relative names made absolute
// against the log's last chdir.
func replayLines(r io.Reader, do func(op, name string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	dir := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if n == 1 {
			if line != "# test log" {
				return fmt.Errorf("line 1: %q, want the header %q", line, "# test log")
			}
			continue
		}
		op, name, ok := strings.Cut(line, " ")
		if !ok || name == "" {
			return fmt.Errorf("line %d: %q is not an entry", n, line)
		}
		if op != "getenv" && dir != "" && !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		switch op {
		case "chdir":
			dir = name
		case "getenv", "stat", "open":
			do(op, name)
		}
		// An entry of a kind this does not know (a later Go's) is
		// passed over: this process's log then misses one input of the
		// second one, as it would without Beside.
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return nil
}

// errNotCollected ends a package whose second process no test collected.
var errNotCollected = errors.New("suitemain: Beside started a second process but no test called Collect: add one to the package")

// commandLineFlags returns the names of the flags in args, a test binary's
// command line: "-name", "--name", "-name=value", or "-name value" for a
// flag that is not boolean (its value is passed over). It stops at "--" or
// at the first argument that is not a flag.
func commandLineFlags(args []string) map[string]bool {
	names := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		names[name] = true
		if f := flag.Lookup(name); !hasValue && f != nil && !isBool(f) {
			i++ // its value
		}
	}
	return names
}

// isBool reports whether f is a boolean flag, which takes no separate
// value.
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
