// Command peersuites runs the integration tests that go-zookeeper/zk and
// hashicorp/consul/api ship, unchanged, against lockproof's fakes (minizk,
// miniconsul), and fails unless every applicable test passes.
//
// The tests are not kept in this repository: at run time the program
// copies a peer's package, tests included, from the module cache into a
// temporary module, swaps the one file that starts the peer's real server
// for a helper of ours (testdata/) that starts a fake under the same
// names, and runs go test there. The temporary module requires this one
// through a replace directive, so the fakes under test are the working
// tree's. Tests that need what a fake does not claim to model (an
// ensemble, the catalog) are skipped by name, each with its reason.
//
// With -zk or -consul the same tests run against a real server instead,
// so that each fake is judged side by side with its server: the helper
// reads the server's address from LOCKPROOF_PEERSUITE_ADDR, empties it
// before each test (as a fresh server would be), and stands in for the
// stops and restarts a test asks for (see testdata/). Only the suites
// given a server run then. The server must be one of its own: the runner
// deletes its data, so an address off this machine (not loopback) is
// refused unless -wipe is given too.
//
// Usage, from the module root:
//
//	go run ./tools/peersuites [-suite zk|consul|all] [-v]
//	go run ./tools/peersuites [-zk host:port] [-consul host:port] [-v]
package main

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed testdata/*.go
var helpers embed.FS

// envAddr passes the real server's address to the helper ("": the fake).
const envAddr = "LOCKPROOF_PEERSUITE_ADDR"

// suite is one peer package and how to run it on a fake.
type suite struct {
	name    string
	module  string // the peer's module path; its version is this module's
	pkg     string // the package's directory inside the module
	drop    []string
	keep    *regexp.Regexp // the test files copied; nil: every one
	helper  string         // the file in testdata/ added in place of drop
	starts  string         // what a test that starts a server calls
	patches []patch        // applied to the copied files
	skipped map[string]string
	// skippedFake are not applicable on the fake only (the real server
	// runs them).
	skippedFake map[string]string
	timeout     time.Duration
}

// patch renames one declaration of a copied file, which the helper then
// declares anew; it must match exactly once.
type patch struct{ file, old, new string }

// target is where a suite runs: its fake, or the real server at addr.
type target struct{ addr string }

func (t target) String() string {
	if t.addr == "" {
		return "the fake"
	}
	return "the real server"
}

// notApplicable returns the tests skipped on t, each with its reason.
func (s suite) notApplicable(t target) map[string]string {
	out := map[string]string{}
	for name, why := range s.skipped {
		out[name] = why
	}
	if t.addr == "" {
		for name, why := range s.skippedFake {
			out[name] = why
		}
	}
	return out
}

var suites = []suite{zkSuite, consulSuite}

func main() {
	which := flag.String("suite", "all", "the suite to run: zk, consul or all")
	verbose := flag.Bool("v", false, "print every test's output")
	addrs := map[string]*string{
		"zk":     flag.String("zk", "", "run the zk suite against the real ZooKeeper at `host:port` (it is emptied)"),
		"consul": flag.String("consul", "", "run the consul suite against the real agent at `host:port` (its KV and sessions are deleted)"),
	}
	wipe := flag.Bool("wipe", false, "allow -zk and -consul to name a server off this machine: its data is deleted")
	flag.Parse()
	for _, name := range []string{"zk", "consul"} {
		if err := checkTarget(*addrs[name], *wipe); err != nil {
			fail(fmt.Errorf("-%s: %w", name, err))
		}
	}
	root, err := moduleRoot()
	if err != nil {
		fail(err)
	}
	onReal := *addrs["zk"] != "" || *addrs["consul"] != ""
	if onReal && *which != "all" {
		fail(errors.New("-suite and -zk/-consul exclude each other: -zk and -consul choose the suites"))
	}
	ran := 0
	for _, s := range suites {
		to := target{addr: *addrs[s.name]}
		if *which != "all" && *which != s.name || onReal && to.addr == "" {
			continue
		}
		ran++
		if err := s.run(root, to, *verbose); err != nil {
			fail(fmt.Errorf("%s on %s: %w", s.name, to, err))
		}
	}
	if ran == 0 {
		fail(fmt.Errorf("no suite named %q", *which))
	}
}

// checkTarget vets a real server's address before anything is run on it.
// The suites delete every node or key they find, so a server off this
// machine is used only with wipe, the user's consent to lose its data.
func checkTarget(addr string, wipe bool) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 1 to 65535", addr, port)
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err == nil && ip.IsLoopback() {
		return nil
	}
	if wipe {
		return nil
	}
	return fmt.Errorf("%s is not a loopback address, and the suite deletes all the server holds: add -wipe if that is what you want", host)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "peersuites:", err)
	os.Exit(1)
}

// moduleRoot returns the directory of the module the program is run in.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a module: run from lockproof's root")
	}
	return filepath.Dir(mod), nil
}

// run copies the suite into a temporary module, runs it on to, and
// reports.
func (s suite) run(root string, to target, verbose bool) error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", s.module).Output()
	if err != nil {
		return fmt.Errorf("go list -m %s (is it in go.mod and downloaded?): %w", s.module, err)
	}
	dir, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	src := filepath.Join(dir, s.pkg)
	tmp, err := os.MkdirTemp("", "peersuite-"+s.name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	names, err := s.copyPackage(src, tmp)
	if err != nil {
		return err
	}
	if err := s.writeModule(root, tmp); err != nil {
		return err
	}
	skipped := s.notApplicable(to)
	for name := range skipped {
		if !names[name] {
			return fmt.Errorf("%s %s has no test %s: update the skip list", s.module, version, name)
		}
	}
	args := []string{"test", "-json", "-count=1", "-vet=off", "-timeout", s.timeout.String()}
	if len(skipped) > 0 {
		args = append(args, "-skip", "^("+strings.Join(sortedKeys(skipped), "|")+")$")
	}
	if to.addr != "" {
		args = append(args, "-p", "1", "-parallel", "1") // one server: one test at a time
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", envAddr+"="+to.addr)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	where := to.String()
	if to.addr != "" {
		where += " at " + to.addr
	}
	fmt.Printf("== %s %s (%s) on %s, from %s\n", s.module, version, s.pkg, where, src)
	if err := cmd.Start(); err != nil {
		return err
	}
	res, perr := tally(stdout, verbose)
	werr := cmd.Wait()
	if perr != nil {
		return perr
	}
	return s.report(names, skipped, to, res, werr, stderr.String())
}

// copyPackage copies the package's Go files, less the dropped ones and
// the test files not kept, and adds the helper; it returns the names of
// the top-level tests copied, each true if it starts a server.
func (s suite) copyPackage(src, dst string) (map[string]bool, error) {
	entries, err := os.ReadDir(src)
	if err != nil {
		return nil, err
	}
	tests := map[string]bool{}
	testFunc := regexp.MustCompile(`^func (Test\w+)\(t \*testing\.T\)`)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || contains(s.drop, name) {
			continue
		}
		isTest := strings.HasSuffix(name, "_test.go")
		if isTest && s.keep != nil && !s.keep.MatchString(name) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return nil, err
		}
		if isTest {
			for _, fn := range strings.Split(string(b), "\nfunc ") {
				if m := testFunc.FindStringSubmatch("func " + fn); m != nil {
					tests[m[1]] = strings.Contains(fn, s.starts)
				}
			}
		}
		if b, err = s.patch(name, b); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			return nil, err
		}
	}
	b, err := helpers.ReadFile("testdata/" + s.helper)
	if err != nil {
		return nil, err
	}
	return tests, os.WriteFile(filepath.Join(dst, "lockproof_"+s.helper), b, 0o644)
}

// patch applies the suite's patches of file name to its text b.
func (s suite) patch(name string, b []byte) ([]byte, error) {
	for _, p := range s.patches {
		if p.file != name {
			continue
		}
		if n := bytes.Count(b, []byte(p.old)); n != 1 {
			return nil, fmt.Errorf("%s: %q occurs %d times, want once: update the patch", name, p.old, n)
		}
		b = bytes.Replace(b, []byte(p.old), []byte(p.new), 1)
	}
	return b, nil
}

// writeModule makes dst a module that requires lockproof from root, with
// root's go.sum (the peer's dependencies are among lockproof's).
func (s suite) writeModule(root, dst string) error {
	mod := fmt.Sprintf("module lockproof.test/peersuite/%s\n\ngo 1.26\n\n"+
		"require github.com/lockproof/lockproof v0.0.0\n\n"+
		"replace github.com/lockproof/lockproof => %s\n", s.name, root)
	if err := os.WriteFile(filepath.Join(dst, "go.mod"), []byte(mod), 0o644); err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, "go.sum"), sum, 0o644)
}

// event is a line of go test -json.
type event struct {
	Action string
	Test   string
	Output string
}

// result is what go test said of each top-level test.
type result struct {
	action map[string]string // pass, fail or skip
	output map[string]*strings.Builder
	other  strings.Builder // output outside any test (build errors, panics)
}

func tally(r io.Reader, verbose bool) (*result, error) {
	res := &result{action: map[string]string{}, output: map[string]*strings.Builder{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			res.other.WriteString(sc.Text() + "\n")
			continue
		}
		if verbose {
			fmt.Print(e.Output)
		}
		top, _, sub := strings.Cut(e.Test, "/")
		switch {
		case e.Test == "":
			res.other.WriteString(e.Output)
		case e.Action == "output":
			if res.output[top] == nil {
				res.output[top] = &strings.Builder{}
			}
			res.output[top].WriteString(e.Output)
		case !sub && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			res.action[top] = e.Action
		}
	}
	return res, sc.Err()
}

// report prints the tally and fails unless every applicable test passed.
func (s suite) report(names map[string]bool, skipped map[string]string, to target, res *result, goTestErr error, stderr string) error {
	var passed, failed []string
	servers, serversPassed := 0, 0
	for _, name := range sortedKeys(names) {
		if _, skip := skipped[name]; skip {
			continue
		}
		if names[name] {
			servers++
		}
		if res.action[name] == "pass" {
			passed = append(passed, name)
			if names[name] {
				serversPassed++
			}
			continue
		}
		failed = append(failed, name)
		verdict := res.action[name]
		if verdict == "" {
			verdict = "did not run"
		}
		fmt.Printf("--- %s: %s\n", name, verdict)
		if o := res.output[name]; o != nil {
			fmt.Print(indent(o.String()))
		}
	}
	for _, name := range sortedKeys(skipped) {
		fmt.Printf("not applicable: %s: %s\n", name, skipped[name])
	}
	applicable := len(names) - len(skipped)
	fmt.Printf("%s: %d tests, %d not applicable, %d applicable: %d pass on %s, %d do not\n",
		s.name, len(names), len(skipped), applicable, len(passed), to, len(failed))
	fmt.Printf("%s: of the applicable, %d start a server: %d of them pass on %s\n",
		s.name, servers, serversPassed, to)
	switch {
	case len(failed) > 0:
		if len(passed) == 0 {
			fmt.Print(indent(res.other.String() + stderr))
		}
		return fmt.Errorf("%d of %d applicable tests do not pass: %s", len(failed), applicable, strings.Join(failed, ", "))
	case len(passed) == 0:
		fmt.Print(indent(res.other.String() + stderr))
		return errors.New("no test ran")
	case goTestErr != nil:
		fmt.Print(indent(res.other.String() + stderr))
		return fmt.Errorf("go test: %w", goTestErr)
	}
	return nil
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ") + "\n"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
