package thirdparty_test

// The propertytest suite run on third-party locks (issue 8 item 6), through
// test-only adapters to locks.Locker and locks.Lease: go-redsync/redsync
// and bsm/redislock on miniredis in manual time, the Mutex of etcd's
// client/v3/concurrency on an embedded etcd in real time, the Lock of
// hashicorp/consul/api on miniconsul in manual time, and the Lock of
// go-zookeeper/zk on minizk in manual time. One file per library
// (<lib>_test.go); this one holds what they share.
//
// What every adapter does the same way (each file documents the rest):
//
//   - The Lease is a locks.ManagedLease over the library's renew and
//     release (locks.LeaseOps), the wrapper lockproof's own locks return.
//     So the client-side rules are lockproof's for every library: Deadline
//     is the start of the granting (or renewing) request + TTL -
//     locks.Drift(TTL); Renew past the deadline is refused locally
//     (ErrLeaseExpired) without reaching the library; Unlock past it still
//     calls the library's release, which is what the symmetry probe
//     judges, and reports ErrLeaseExpired (an unknown outcome to the
//     suite); a second Unlock is ErrReleased. What reaches the server, and
//     what the server does, is the library's alone.
//   - Errors: the library's "held by someone else" answer to a single
//     attempt becomes locks.ErrLocked, its "you do not hold it" answer to a
//     renew or release becomes locks.ErrNotHeld; every other error passes
//     through unchanged, which the suite records as an unknown outcome.
//     No retry, check or clean-up is added beyond what the library's
//     documented use calls for (each file says which).
//   - Start: the grant's start is a moment no later than the request that
//     set the lease on the server, read on the run's clock, so that the
//     Deadline is never later than the library's own validity.
//   - Lock: the library's blocking call, with the run's ctx. The Redis
//     libraries poll in wall time: their retry delay is set short enough
//     for Settle. etcd and Consul wait on notifications (a watch, a
//     blocking query) as they are.
//
// Seeds: every test fixes rapid's seed (its own default below, or
// -rapid.seed when given) and logs it with the command that replays it.

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
)

// epoch is where the manual clocks of the adapters' fakes start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// grant is one acquisition made by a library, as the adapter hands it to
// locks.NewLease.
type grant struct {
	ops    locks.LeaseOps
	token  locks.Token
	fenced bool
	start  time.Time // no later than the request that set the lease
	// lost, if the library has one, is closed when it reports the lock
	// lost (Consul's lost-lock channel).
	lost <-chan struct{}
}

// acquireFunc makes one attempt (wait false) or waits for the lock (wait
// true) with the library's own call.
type acquireFunc func(ctx context.Context, wait bool) (grant, error)

// adapted is the locks.Locker of one client of a third-party lock.
type adapted struct {
	name    string
	opt     locks.Options
	acquire acquireFunc
}

var _ locks.Locker = (*adapted)(nil)

// Lock waits with the library's blocking call.
func (a *adapted) Lock(ctx context.Context) (locks.Lease, error) { return a.lease(ctx, true) }

// TryLock makes the library's single attempt.
func (a *adapted) TryLock(ctx context.Context) (locks.Lease, error) { return a.lease(ctx, false) }

// lease wraps a grant in a ManagedLease. A grant whose deadline has
// already passed (the run's clock moved while the call was in flight) is
// still returned as granted, as the library returned it: its lease is
// simply expired already.
func (a *adapted) lease(ctx context.Context, wait bool) (locks.Lease, error) {
	g, err := a.acquire(ctx, wait)
	if err != nil {
		return nil, err
	}
	spec := locks.LeaseSpec{Name: a.name, Token: g.token, Fenced: g.fenced, Start: g.start}
	l := locks.NewLease(spec, g.ops, a.opt)
	if g.lost != nil {
		return &lostLease{ManagedLease: l, lost: g.lost}, nil
	}
	return l, nil
}

// lostLease is a ManagedLease that the library can also declare lost:
// once lost is closed, Err reports locks.ErrNotHeld and Done is closed.
type lostLease struct {
	*locks.ManagedLease
	lost <-chan struct{}

	once sync.Once
	done chan struct{}
}

var _ locks.Lease = (*lostLease)(nil)

// Err is the ManagedLease's, or ErrNotHeld once the library reported the
// lock lost.
func (l *lostLease) Err() error {
	if err := l.ManagedLease.Err(); err != nil {
		return err
	}
	select {
	case <-l.lost:
		return fmt.Errorf("lock %q: %w: the library reported it lost", l.Name(), locks.ErrNotHeld)
	default:
		return nil
	}
}

// Done is closed when the ManagedLease's Done is, or the lock is lost. Its
// goroutine starts at the first call and ends with either.
func (l *lostLease) Done() <-chan struct{} {
	l.once.Do(func() {
		l.done = make(chan struct{})
		go func() {
			defer close(l.done)
			select {
			case <-l.ManagedLease.Done():
			case <-l.lost:
			}
		}()
	})
	return l.done
}

// leaseOps is locks.LeaseOps from two functions.
type leaseOps struct {
	renew, release func(ctx context.Context) error
}

var _ locks.LeaseOps = leaseOps{}

func (o leaseOps) Renew(ctx context.Context) error   { return o.renew(ctx) }
func (o leaseOps) Release(ctx context.Context) error { return o.release(ctx) }

// notHeld wraps a library's "not held" answer in locks.ErrNotHeld.
func notHeld(lib string, err error) error {
	return fmt.Errorf("%s: %w: %w", lib, locks.ErrNotHeld, err)
}

// locked wraps a library's "held by another" answer in locks.ErrLocked.
func locked(lib string, err error) error {
	return fmt.Errorf("%s: %w: %w", lib, locks.ErrLocked, err)
}

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
	propertytest.SetFlag(t, "rapid.seed", strconv.FormatUint(seed, 10))
	env := ""
	if propertytest.Deep() {
		env = "LOCKPROOF_DEEP=1 "
	}
	t.Logf("seed %d; replay: %sgo test ./propertytest/thirdparty -run '^%s$' -rapid.seed=%d -timeout 300s -v", seed, env, t.Name(), seed)
	return seed
}

// ownClaims runs the suite on a library with the claims it makes itself:
// it must pass. It logs the expected violations (faults the library does
// not claim) and the time taken.
func ownClaims(t *testing.T, seed uint64, f propertytest.Factory, o propertytest.Options) *propertytest.Report {
	t.Helper()
	useSeed(t, seed)
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
// as a failure (VIOLATED), with a seed that replays it.
func strongerClaim(t *testing.T, seed uint64, f propertytest.Factory, o propertytest.Options, want propertytest.Property) {
	t.Helper()
	useSeed(t, seed)
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
