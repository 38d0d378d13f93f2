package propertytest

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
)

// processLocal gives every client a MemLock of its own: a process-local
// mutex in a system of several processes, so two clients hold "the" lock
// at once.
func processLocal() Factory {
	return func(Env) (*Backend, error) {
		clock := fakes.NewClock(epoch)
		return &Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				return fakes.NewMemLock(name, append([]locks.Option{locks.WithClock(clock)}, opts...)...)
			},
			Clock:     clock,
			Advance:   clock.Advance,
			InProcess: true,
		}, nil
	}
}

func TestRunStandalonePassesACorrectLock(t *testing.T) {
	before := flag.Lookup("rapid.checks").Value.String()
	var log bytes.Buffer
	rep, err := RunStandalone(memLock(), Options{}, Standalone{Name: "memlock", Checks: 5, Seed: 42, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed || rep.Runs != 5 || rep.Checked[Exclusivity] != 5 {
		t.Fatalf("failed=%v runs=%d checked=%v\n%s", rep.Failed, rep.Runs, rep.Checked, rep.Output)
	}
	if !strings.Contains(log.String(), "[rapid] OK, passed 5 tests") {
		t.Errorf("the log did not receive rapid's verdict:\n%s", log.String())
	}
	if after := flag.Lookup("rapid.checks").Value.String(); after != before {
		t.Errorf("rapid.checks left at %s, was %s", after, before)
	}
}

// The runs are not minimized (ShrinkTime 1ms): what is tested is that the
// seed replays the failure, which shrinking does not change, and with the
// default 10 s the two calls spent 30 s of this package's time shrinking.
func TestRunStandaloneCatchesAndReplays(t *testing.T) {
	dir := t.TempDir()
	rep, err := RunStandalone(processLocal(), Options{OutDir: dir}, Standalone{Name: "process-local", Checks: 50, Seed: 7, ShrinkTime: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Failed || rep.Seed == 0 {
		t.Fatalf("a process-local lock passed, or no seed (failed=%v seed=%d)\n%s", rep.Failed, rep.Seed, rep.Output)
	}
	if b := rep.Broken(); len(b) == 0 || b[0] != Exclusivity {
		t.Fatalf("broken %v, want exclusivity first", b)
	}
	if f := rep.Violations[0].File; !strings.HasPrefix(f, dir) || !strings.HasSuffix(f, ".json") {
		t.Errorf("history %q not written under OutDir %s as JSON", f, dir)
	}
	again, err := RunStandalone(processLocal(), Options{OutDir: dir}, Standalone{Name: "replay", Checks: 1, Seed: rep.Seed, ShrinkTime: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Failed || again.FirstFailure != 1 || again.Seed != rep.Seed {
		t.Fatalf("seed %d did not replay the failure in its first run (failed=%v first=%d seed=%d)", rep.Seed, again.Failed, again.FirstFailure, again.Seed)
	}
	t.Logf("caught at run %d, replayed from seed %d: %s", rep.FirstFailure, rep.Seed, rep.Violations[0].Detail)
}

func TestRunStandaloneWithoutVerdict(t *testing.T) {
	broken := func(Env) (*Backend, error) { return nil, errors.New("no backend today") }
	_, err := RunStandalone(broken, Options{}, Standalone{Name: "broken", Checks: 3, ShrinkTime: 1})
	if !errors.Is(err, ErrNoVerdict) || !strings.Contains(err.Error(), "no backend today") {
		t.Errorf("factory error: got %v", err)
	}
	nilBackend := func(Env) (*Backend, error) { return nil, nil }
	_, err = RunStandalone(nilBackend, Options{}, Standalone{Name: "nil backend", Checks: 3, ShrinkTime: 1})
	if !errors.Is(err, ErrNoVerdict) || !strings.Contains(err.Error(), "nil backend") {
		t.Errorf("factory returning no backend: got %v", err)
	}
	for _, s := range []Standalone{{}, {Name: "x", Checks: -1}} {
		if _, err := RunStandalone(memLock(), Options{}, s); err == nil || errors.Is(err, ErrNoVerdict) {
			t.Errorf("%+v: got %v, want a bad-input error", s, err)
		}
	}
	if _, err := RunStandalone(nil, Options{}, Standalone{Name: "nil"}); err == nil {
		t.Error("nil factory accepted")
	}
}

// A factory that fails the way a fake's Start does when its server does
// not answer gives ErrNoVerdict with that cause.
func TestRunStandaloneKeepsTheFactorysCause(t *testing.T) {
	down := func(Env) (*Backend, error) {
		_, err := redisfake.Start(redisfake.At("127.0.0.1:1"))
		return nil, err
	}
	_, err := RunStandalone(down, Options{}, Standalone{Name: "down", Checks: 1, Seed: 1})
	if !errors.Is(err, ErrNoVerdict) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error %v, want ErrNoVerdict with the factory's cause", err)
	}
}

// A failure shrinks by a number of runs, not by the wall time: two replays
// of one seed, with a wall-time bound far away, stop at the same candidate
// and report the same minimal history; the runs made stay within the
// budget (the search's one, its reproduction, two per accepted candidate
// and one per refused one, the last report).
func TestShrinkIsBoundedByRuns(t *testing.T) {
	dir := t.TempDir()
	first, err := RunStandalone(processLocal(), Options{OutDir: dir}, Standalone{Name: "find", Checks: 50, Seed: 7})
	if err != nil || !first.Failed {
		t.Fatalf("no failure to shrink: %v", err)
	}
	const budget = 12
	var histories []string
	for i := range 2 {
		rep, err := RunStandalone(processLocal(), Options{OutDir: dir, ShrinkRuns: budget},
			Standalone{Name: "shrink", Checks: 1, Seed: first.Seed, ShrinkTime: time.Minute})
		if err != nil || !rep.Failed || len(rep.Violations) == 0 {
			t.Fatalf("replay %d: failed=%v err=%v", i, rep != nil && rep.Failed, err)
		}
		if most := 2 + 2*budget + 1; rep.Runs > most {
			t.Errorf("replay %d made %d runs, more than the %d a budget of %d candidates allows", i, rep.Runs, most, budget)
		}
		histories = append(histories, rep.Violations[0].Detail+"\n"+rep.Violations[0].History)
	}
	if histories[0] != histories[1] {
		t.Fatalf("two replays of seed %d shrank to different runs:\n%s\n---\n%s", first.Seed, histories[0], histories[1])
	}
}

// shrinkBudget follows rapid's calls: it never refuses the search, the
// reproduction or the second run of a failing candidate, and refuses a
// candidate's first run once the budget is spent.
func TestShrinkBudgetFollowsRapid(t *testing.T) {
	var b shrinkBudget
	step := func(wantCall shrinkCall, wantSpent, fails bool) {
		t.Helper()
		call, spent := b.start(2)
		if call != wantCall || spent != wantSpent {
			t.Fatalf("call %v spent %v, want %v %v", call, spent, wantCall, wantSpent)
		}
		if !spent {
			b.end(call, fails)
		}
	}
	step(searchRun, false, false)
	step(searchRun, false, true)     // the first failure
	step(reproduceRun, false, true)  // rapid reproduces it
	step(candidateRun, false, false) // candidate 1 passes: rejected
	step(candidateRun, false, true)  // candidate 2 fails...
	step(secondRun, false, true)     // ...and is run again
	step(candidateRun, true, false)  // candidate 3: over the budget of 2
	step(candidateRun, true, false)  // and so on, until rapid gives up
	if got := b.tried(); got != 2 {
		t.Errorf("tried %d candidates, want 2: those past the budget, rapid's last run of the smallest case among them, were refused", got)
	}
	// Without a bound, rapid's last run of the smallest case is let
	// through, and is no candidate: a replay bounded by tried() stops
	// where a shrink cut short by the wall time stopped.
	var timed shrinkBudget
	for _, c := range []struct {
		call  shrinkCall
		fails bool
	}{{searchRun, true}, {reproduceRun, true}, {candidateRun, false}, {candidateRun, true}, {secondRun, true}, {candidateRun, true}} {
		call, _ := timed.start(-1)
		if call != c.call {
			t.Fatalf("call %v, want %v", call, c.call)
		}
		timed.end(call, c.fails)
	}
	if got := timed.tried(); got != 2 {
		t.Errorf("tried %d candidates, want 2 (the last run prints the smallest case)", got)
	}
	var unbounded shrinkBudget
	unbounded.phase = shrinking
	for range 1000 {
		if _, spent := unbounded.start(-1); spent {
			t.Fatal("a negative budget was spent")
		}
	}
}

// The Env a factory gets in RunStandalone runs its clean-ups at the end of
// every run, last registered first, and sends its log lines to Log.
func TestRunStandaloneEnv(t *testing.T) {
	var order []string
	runs := 0
	counting := func(env Env) (*Backend, error) {
		runs++
		env.Logf("factory run %d", runs)
		env.Cleanup(func() { order = append(order, "second") })
		env.Cleanup(func() { order = append(order, "first") })
		return memLock()(env)
	}
	var log bytes.Buffer
	rep, err := RunStandalone(counting, Options{}, Standalone{Name: "env", Checks: 3, Seed: 9, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if runs != rep.Runs || len(order) != 2*runs {
		t.Fatalf("%d factory calls, %d runs, clean-ups %v", runs, rep.Runs, order)
	}
	for i := 0; i < len(order); i += 2 {
		if order[i] != "first" || order[i+1] != "second" {
			t.Fatalf("clean-ups ran in the order %v, want the last registered first", order)
		}
	}
	if !strings.Contains(log.String(), "factory run 3") || !strings.Contains(rep.Output, "factory run 1") {
		t.Errorf("the factory's log lines are missing:\n%s", log.String())
	}
}
