package thirdparty_test

// The propertytest suite run on third-party locks (issue 8 item 6), through
// test-only adapters to locks.Locker and locks.Lease: go-redsync/redsync
// and bsm/redislock on miniredis in manual time, the Mutex of etcd's
// client/v3/concurrency on an embedded etcd in real time, the Lock of
// hashicorp/consul/api on miniconsul in manual time, and the Lock of
// go-zookeeper/zk on minizk in manual time. One file per library
// (<lib>_test.go); this one holds the test plumbing they share.
//
// Every adapter is built on the kit of propertytest/adapter, which a user
// testing a lock of their own imports too: the library's calls given as
// functions (adapter.Lock, adapter.Grant), the kit's leases, deadlines and
// error mapping (see its package doc). What each adapter adds:
//
//   - Errors: the library's "held by someone else" answer to a single
//     attempt is wrapped with adapter.Locked, its "you do not hold it"
//     answer to a renew or release with adapter.NotHeld; every other error
//     passes through unchanged, which the suite records as an unknown
//     outcome. No retry, check or clean-up is added beyond what the
//     library's documented use calls for (each file says which).
//   - Start: the grant's start is a moment no later than the request that
//     set the lease on the server, read on the run's clock (by the kit at
//     the requests Lock.Grants names, or by the adapter in Grant.Start),
//     so that the Deadline is never later than the library's own validity.
//   - Lock: the library's blocking call, with the run's ctx. The Redis
//     libraries poll in wall time: their retry delay is set short enough
//     for Settle. etcd and Consul wait on notifications (a watch, a
//     blocking query) as they are.
//
// Seeds: every test fixes rapid's seed (its own default below, or
// -rapid.seed when given) and logs it with the command that replays it.

import (
	"flag"
	"strconv"
	"testing"
	"time"

	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// caughtShrinkRuns bounds by default the shrinking of a failure that
// strongerClaim expects: each candidate is a whole run, seconds of wall
// time for the libraries on loopback TCP or in real time.
const caughtShrinkRuns = 1

// epoch is where the manual clocks of the adapters' fakes start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// seedFlag is the -rapid.seed given on the command line, read once before
// any test changes the flag.
var seedFlag = func() func() uint64 {
	var seed uint64
	var read bool
	return func() uint64 {
		if !read {
			read = true
			seed, _ = strconv.ParseUint(flag.Lookup("rapid.seed").Value.String(), 10, 64)
		}
		return seed
	}
}()

// useSeed fixes rapid's seed for t: -rapid.seed when given, else def. It
// logs the command that replays the test.
func useSeed(t *testing.T, def uint64) uint64 {
	t.Helper()
	seed := seedFlag()
	if seed == 0 {
		seed = def
	}
	suitemain.SetFlag(t, "rapid.seed", strconv.FormatUint(seed, 10))
	env := ""
	if suitemain.Deep() {
		env = "LOCKPROOF_DEEP=1 "
	}
	t.Logf("seed %d; replay: %sgo test ./propertytest/thirdparty -run '^%s$' -rapid.seed=%d -timeout 300s -v", seed, env, t.Name(), seed)
	return seed
}

// quickSeed is the seed a test that expects a violation starts from: by
// default quick, a seed whose first run finds it; under LOCKPROOF_DEEP=1
// search, from which the suite searches through passing runs first, as a
// user's run would.
func quickSeed(quick, search uint64) uint64 {
	if suitemain.Deep() {
		return search
	}
	return quick
}

// ownClaims runs the suite on a library with the claims it makes itself:
// it must pass. It logs the expected violations (faults the library does
// not claim) and the time taken.
func ownClaims(t *testing.T, seed uint64, f propertytest.Factory, o propertytest.Options) *propertytest.Report {
	t.Helper()
	useSeed(t, seed)
	return passesOwnClaims(t, f, o)
}

// passesOwnClaims is ownClaims with rapid's flags left as they are: for a
// parallel subtest, whose parent set them (a parallel test must not).
func passesOwnClaims(t *testing.T, f propertytest.Factory, o propertytest.Options) *propertytest.Report {
	t.Helper()
	began := time.Now()
	rep := propertytest.Run(t, f, o)
	t.Logf("%d runs in %v; checked %v; expected violations %v; undecided %d",
		rep.Runs, time.Since(began).Round(time.Millisecond), rep.Checked, rep.Expected, rep.Undecided)
	if rep.ExpectedExample != nil {
		t.Logf("an expected violation: %s", rep.ExpectedExample.Detail)
	}
	if rep.Runs == 0 || rep.Checked[propertytest.Exclusivity] != rep.Runs {
		t.Fatalf("exclusivity checked in %d of %d runs", rep.Checked[propertytest.Exclusivity], rep.Runs)
	}
	return rep
}

// strongerClaim runs the suite on a library held to a claim it does not
// make, and asserts that the suite reports the violation it must: want,
// as a failure (VIOLATED), with a seed that replays it. By default it
// shrinks the failure by at most caughtShrinkRuns candidates: what it
// asserts is that the violation is found and named, which the failing run
// shows; under LOCKPROOF_DEEP=1 the test's own ShrinkRuns (the suite's
// default unless set) minimize it as a user would see it.
func strongerClaim(t *testing.T, seed uint64, f propertytest.Factory, o propertytest.Options, want propertytest.Property) {
	t.Helper()
	useSeed(t, seed)
	if !suitemain.Deep() && (o.ShrinkRuns <= 0 || o.ShrinkRuns > caughtShrinkRuns) {
		o.ShrinkRuns = caughtShrinkRuns
	}
	began := time.Now()
	rep := propertytest.Check(t, f, o)
	took := time.Since(began).Round(time.Millisecond)
	if !rep.Failed {
		t.Fatalf("held to claims %v, the library passed %d runs in %v: the suite lost the power to find it", o.Claims, rep.Runs, took)
	}
	broken := rep.Broken()
	if len(broken) == 0 || broken[0] != want {
		t.Fatalf("broken %v, want %s first\n%s", broken, want, rep.Output)
	}
	if rep.Seed == 0 {
		t.Errorf("the failure printed no seed to replay:\n%s", rep.Output)
	}
	t.Logf("VIOLATED as expected: %s at run %d (%d runs with shrinking, %v); failing seed %d: %s",
		want, rep.FirstFailure, rep.Runs, took, rep.Seed, rep.Violations[0].Detail)
}
