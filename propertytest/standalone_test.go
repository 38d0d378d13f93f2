package propertytest

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
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
			Clock:   clock,
			Advance: clock.Advance,
		}, nil
	}
}

func TestRunStandalonePassesACorrectLock(t *testing.T) {
	before := flag.Lookup("rapid.checks").Value.String()
	var log bytes.Buffer
	rep, err := RunStandalone(MemLock(), Options{}, Standalone{Name: "memlock", Checks: 5, Seed: 42, Log: &log})
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

func TestRunStandaloneCatchesAndReplays(t *testing.T) {
	dir := t.TempDir()
	rep, err := RunStandalone(processLocal(), Options{OutDir: dir}, Standalone{Name: "process-local", Checks: 50, Seed: 7})
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
	again, err := RunStandalone(processLocal(), Options{OutDir: dir}, Standalone{Name: "replay", Checks: 1, Seed: rep.Seed})
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
		if _, err := RunStandalone(MemLock(), Options{}, s); err == nil || errors.Is(err, ErrNoVerdict) {
			t.Errorf("%+v: got %v, want a bad-input error", s, err)
		}
	}
	if _, err := RunStandalone(nil, Options{}, Standalone{Name: "nil"}); err == nil {
		t.Error("nil factory accepted")
	}
}

// On a real Redis (LOCKPROOF_REDIS_ADDR, as CI's real-server step sets),
// the suite runs in real time and finds nothing wrong with redislock.
func TestRedisLockOnRealServer(t *testing.T) {
	addr := os.Getenv(fakes.EnvRedisAddr)
	if addr == "" {
		t.Skipf("no real Redis: set %s to run this test", fakes.EnvRedisAddr)
	}
	SetChecks(t, 3)
	rep := Run(t, RedisLockOn(addr), Options{TTL: 200 * time.Millisecond})
	if rep.Runs == 0 || rep.Checked[DeadlockFreedom] != rep.Runs {
		t.Fatalf("checks ran %v in %d runs", rep.Checked, rep.Runs)
	}
}

// On real Redis servers (LOCKPROOF_REDIS_ADDRS), the suite runs Redlock in
// real time and finds nothing wrong with it.
func TestRedlockOnRealServer(t *testing.T) {
	env := os.Getenv(fakes.EnvRedisAddrs)
	if env == "" {
		t.Skipf("no real Redis servers: set %s to run this test", fakes.EnvRedisAddrs)
	}
	SetChecks(t, 3)
	rep := Run(t, RedlockOn(strings.Split(env, ",")), Options{TTL: 200 * time.Millisecond,
		Claims: []FaultKind{FaultCrash}})
	if rep.Runs == 0 || rep.Checked[DeadlockFreedom] != rep.Runs {
		t.Fatalf("checks ran %v in %d runs", rep.Checked, rep.Runs)
	}
}

// A factory that fails the way a fake's Start does when its server does
// not answer gives ErrNoVerdict with that cause.
func TestRunStandaloneKeepsTheFactorysCause(t *testing.T) {
	down := func(Env) (*Backend, error) {
		_, err := fakes.StartRedis(fakes.RedisAt("127.0.0.1:1"))
		return nil, err
	}
	_, err := RunStandalone(down, Options{}, Standalone{Name: "down", Checks: 1, Seed: 1})
	if !errors.Is(err, ErrNoVerdict) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error %v, want ErrNoVerdict with the factory's cause", err)
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
		return MemLock()(env)
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
