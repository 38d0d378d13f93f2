package suitemain

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/propertytest/internal/gostack"
	"go.uber.org/goleak"
	_ "pgregory.net/rapid" // registers the -rapid.* flags Main sets
)

// checksGiven records whether -rapid.checks was on the command line, as
// Main found it.
var checksGiven atomic.Bool

// Main runs a package's tests with short defaults for the suite, and a
// goroutine-leak check at the end (fakes.VerifyNoLeaks, allowing for the
// port allocator of a real Consul agent: fakes.IgnoreConsulPorts). Call it
// from TestMain. Unless given on the command line, rapid runs 15 checks per
// property test, shrinks for at most 2 s and writes no fail files (the
// seed printed with every failure replays it); with LOCKPROOF_DEEP=1 in
// the environment it runs 500 checks instead (OwnRapidDefaults: rapid's
// flags are left alone).
//
// opts narrow the leak check (see Option); without them every leaked
// goroutine fails the package. Beside runs the tests that mostly wait in
// a second process, beside the others. A bad option ends the test binary
// with exit code 2 before any test runs.
func Main(m *testing.M, opts ...Option) {
	f, err := newConfig(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	flag.Parse()
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	checksGiven.Store(given["rapid.checks"])
	defaults := map[string]string{
		"rapid.checks":     "15",
		"rapid.shrinktime": "2s",
		"rapid.nofailfile": "true",
	}
	if Deep() {
		defaults["rapid.checks"] = "500"
	}
	if f.ownDefaults {
		clear(defaults)
	}
	for name, v := range defaults {
		if given[name] {
			continue
		}
		if err := flag.Set(name, v); err != nil {
			fmt.Fprintf(os.Stderr, "suitemain: -%s=%s: %v\n", name, v, err)
			os.Exit(2)
		}
	}
	cmdline := commandLineFlags(os.Args[1:])
	if len(f.beside) > 0 && besideWanted(cmdline) {
		// The other processes die with the thread that started them
		// (Pdeathsig): this one, kept for the life of the process.
		runtime.LockOSThread()
		if beside, err = startAllBeside(f.beside, cmdline); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	if f.empty() && len(beside) == 0 {
		fakes.VerifyNoLeaks(m, fakes.IgnoreConsulPorts()) // a test may start a real Consul agent
		return
	}
	code := m.Run()
	if len(beside) > 0 && !beside[0].collected {
		for _, b := range beside {
			b.stop()
		}
		if code == 0 {
			fmt.Fprintln(os.Stderr, errNotCollected)
			code = 1
		}
	}
	if code == 0 {
		// The same allowances as fakes.VerifyNoLeaks: a real Consul
		// agent's port allocator, go-zookeeper's and etcd's wedged
		// goroutines, and the grace of etcd's peer connections (here a
		// retry).
		if err := f.find(fakes.EtcdPeerGrace, fakes.IgnoreConsulPorts(), fakes.ZKFlushWedge(), fakes.EtcdVersionWedge()); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// LockproofModule is the path of lockproof's module, the package prefix
// OnlyLockproof keeps.
const LockproofModule = "github.com/lockproof/lockproof"

// Option narrows the goroutine-leak check Main runs after the tests, or
// (Beside) runs some tests in a second process.
// A goroutine belongs to a package when one of its frames, or the function
// that started it, is in that package or below it. The check fails the
// package only on goroutines left that belong to a package of OnlyPackages
// (all, when none is named) and to no package of IgnorePackages.
type Option func(*config)

// IgnorePackages makes Main's leak check pass over every goroutine that
// belongs to one of the packages named by import path (see Option):
// a library's connection pool or keep-alive that has no Close to call.
func IgnorePackages(paths ...string) Option {
	return func(c *config) { c.ignore = append(c.ignore, paths...) }
}

// OnlyPackages makes Main's leak check look only at goroutines that
// belong to one of the packages named by import path (see Option),
// such as the module under test. A leaked goroutine wholly inside a
// library, whoever started it (a server the tests forgot to close, say),
// is then not seen.
func OnlyPackages(paths ...string) Option {
	return func(c *config) { c.only = append(c.only, paths...) }
}

// OnlyLockproof makes Main's leak check look only at lockproof's own
// goroutines: OnlyPackages(LockproofModule).
func OnlyLockproof() Option { return OnlyPackages(LockproofModule) }

// leakFilter is what Main's options make of the leak check.
type leakFilter struct {
	ignore, only []string
}

// config is what Main's options make: the leak check's filter, the
// patterns of Beside, and whether rapid's defaults are the caller's.
type config struct {
	leakFilter
	beside      []string
	ownDefaults bool
}

// OwnRapidDefaults makes Main leave rapid's flags as the command line and
// the caller set them, for a package whose TestMain sets defaults of its
// own before it calls Main.
func OwnRapidDefaults() Option {
	return func(c *config) { c.ownDefaults = true }
}

// newConfig applies opts and validates the package paths.
func newConfig(opts []Option) (*config, error) {
	f := &config{}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("suitemain: Main: a nil Option")
		}
		o(f)
	}
	for _, list := range [][]string{f.ignore, f.only} {
		for i, p := range list {
			list[i] = strings.TrimSuffix(p, "/")
			if list[i] == "" {
				return nil, errors.New("suitemain: Main: an empty package path in IgnorePackages or OnlyPackages")
			}
		}
	}
	return f, nil
}

// empty reports whether f keeps every goroutine.
func (f *leakFilter) empty() bool { return len(f.ignore) == 0 && len(f.only) == 0 }

// keeps reports whether the leak check looks at a goroutine whose frames
// and creator are the functions funcs.
func (f *leakFilter) keeps(funcs []string) bool {
	in := func(list []string) bool {
		for _, fn := range funcs {
			pkg := gostack.FuncPackage(fn)
			for _, p := range list {
				if pkg == p || strings.HasPrefix(pkg, p+"/") {
					return true
				}
			}
		}
		return false
	}
	return (len(f.only) == 0 || in(f.only)) && !in(f.ignore)
}

// find runs goleak.Find with base, and keeps of the goroutines it reports
// those f keeps; while some are left, it looks again until grace has
// passed (goroutines that are ending, such as etcd's peer connections),
// then reports them.
func (f *leakFilter) find(grace time.Duration, base ...goleak.Option) error {
	deadline := time.Now().Add(grace)
	for {
		err := goleak.Find(base...)
		if err == nil {
			return nil
		}
		kept, ok := f.kept(err.Error())
		if ok && len(kept) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if !ok {
				return err // not in the form f reads: report all of it
			}
			return fmt.Errorf("suitemain: found unexpected goroutines (after the options of suitemain.Main):\n%s", strings.Join(kept, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leakHeader opens each goroutine in goleak v1.3.0's report.
var leakHeader = regexp.MustCompile(`^[\[ ]?Goroutine \d+ in state `)

// kept splits goleak's report into its goroutines and returns those f
// keeps, as reported. ok is false when the report holds no goroutine in
// the form it knows, so that the caller reports the whole of it rather
// than pass a leak it could not read.
func (f *leakFilter) kept(report string) ([]string, bool) {
	var blocks [][]string
	for _, line := range strings.Split(report, "\n") {
		if leakHeader.MatchString(line) {
			blocks = append(blocks, []string{strings.TrimLeft(line, "[ ")})
			continue
		}
		if len(blocks) > 0 && line != "]" {
			blocks[len(blocks)-1] = append(blocks[len(blocks)-1], line)
		}
	}
	var out []string
	for _, b := range blocks {
		var funcs []string
		for _, line := range b[1:] {
			if line == "" || strings.HasPrefix(line, "\t") {
				continue // a file and line, or the end
			}
			if after, ok := strings.CutPrefix(line, "created by "); ok {
				funcs = append(funcs, strings.SplitN(after, " in goroutine", 2)[0])
			} else if i := strings.LastIndexByte(line, '('); i > 0 {
				funcs = append(funcs, line[:i])
			}
		}
		if len(funcs) == 0 || f.keeps(funcs) {
			out = append(out, strings.Join(b, "\n"))
		}
	}
	return out, len(blocks) > 0
}

// Deep reports whether LOCKPROOF_DEEP=1 asks for the long runs.
func Deep() bool { return os.Getenv("LOCKPROOF_DEEP") == "1" }

// ChecksGiven reports whether -rapid.checks was given on the command line
// (known once Main has run).
func ChecksGiven() bool { return checksGiven.Load() }

// SetChecks sets rapid's check count to n for one test, and back at its
// end: fewer for a slow test, more for a mutant (rapid stops at the first
// failure, so a mutant's runs cost only until it is caught). It does
// nothing when -rapid.checks was given or under Deep, which decide
// instead. Tests that call it must not run in parallel.
func SetChecks(t testing.TB, n int) {
	t.Helper()
	if ChecksGiven() || Deep() {
		return
	}
	SetFlag(t, "rapid.checks", strconv.Itoa(n))
}

// SetFlag sets the command-line flag called name (one of rapid's, such as
// rapid.steps or rapid.seed) to value for one test, and back at its end.
// An unknown flag or a bad value fails t. Tests that call it must not run
// in parallel.
func SetFlag(t testing.TB, name, value string) {
	t.Helper()
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("suitemain: no flag -%s", name)
	}
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatalf("suitemain: -%s=%s: %v", name, value, err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}
