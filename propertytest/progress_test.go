package propertytest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// wrapMemLock is the MemLock factory with every client's Locker wrapped by
// wrap; the clients share n, a count of calls wrap may use.
func wrapMemLock(wrap func(l locks.Locker, n *atomic.Int64) locks.Locker) Factory {
	return func(env Env) (*Backend, error) {
		be, err := memLock()(env)
		if err != nil {
			return nil, err
		}
		inner, n := be.NewLocker, &atomic.Int64{}
		be.NewLocker = func(name string, opts ...locks.Option) (locks.Locker, error) {
			l, err := inner(name, opts...)
			if err != nil {
				return nil, err
			}
			return wrap(l, n), nil
		}
		return be, nil
	}
}

// failingLease fails every Unlock and Renew with an error of its own and
// changes nothing on the backend, as a lock whose release script cannot
// run (kvtools/redis built with a raw codec): it is freed by its TTL only.
type failingLease struct{ locks.Lease }

var errScript = errors.New("ERR Error running script: attempt to compare nil with number")

func (failingLease) Unlock(context.Context) error { return errScript }
func (failingLease) Renew(context.Context) error  { return errScript }

// leaseWrapping hands out the leases of its Locker wrapped by wrap.
type leaseWrapping struct {
	locks.Locker
	wrap func(locks.Lease) locks.Lease
}

func (l leaseWrapping) Lock(ctx context.Context) (locks.Lease, error) {
	return l.wrapped(l.Locker.Lock(ctx))
}

func (l leaseWrapping) TryLock(ctx context.Context) (locks.Lease, error) {
	return l.wrapped(l.Locker.TryLock(ctx))
}

func (l leaseWrapping) wrapped(lease locks.Lease, err error) (locks.Lease, error) {
	if err != nil {
		return nil, err
	}
	return l.wrap(lease), nil
}

// A lock whose every Unlock and Renew fails is caught as Progress, and the
// report counts the failures.
func TestEveryReleaseFailingBreaksProgress(t *testing.T) {
	suitemain.SetChecks(t, 50)
	suitemain.SetFlag(t, "rapid.seed", "32")
	rep := Check(t, wrapMemLock(func(l locks.Locker, _ *atomic.Int64) locks.Locker {
		return leaseWrapping{l, func(lease locks.Lease) locks.Lease { return failingLease{lease} }}
	}), Options{})
	if !rep.Failed {
		t.Fatalf("a lock whose releases all fail passed %d runs; outcomes %v", rep.Runs, rep.Outcomes)
	}
	if b := rep.Broken(); len(b) == 0 || b[0] != Progress {
		t.Fatalf("broken %v, want %s first:\n%s", b, Progress, rep.Output)
	}
	if o := rep.Outcomes["Unlock"]; o.Failed == 0 || o.OK != 0 {
		t.Errorf("Unlock outcomes %v: want failures and no success", o)
	}
}

// noopUnlockLease reports every Unlock a success and leaves the lock
// taken until its TTL runs out.
type noopUnlockLease struct{ locks.Lease }

func (noopUnlockLease) Unlock(context.Context) error { return nil }

// A lock whose Unlock says yes and frees nothing comes free by its TTL: not
// a deadlock, but Progress broken.
func TestUnlockThatFreesNothingBreaksProgress(t *testing.T) {
	suitemain.SetChecks(t, 50)
	suitemain.SetFlag(t, "rapid.seed", "33")
	rep := Check(t, wrapMemLock(func(l locks.Locker, _ *atomic.Int64) locks.Locker {
		return leaseWrapping{l, func(lease locks.Lease) locks.Lease { return noopUnlockLease{lease} }}
	}), Options{ShrinkRuns: 1}) // the failing run names the property; shrinking it took 250 runs
	if !rep.Failed {
		t.Fatalf("a lock whose Unlock frees nothing passed %d runs", rep.Runs)
	}
	if b := rep.Broken(); len(b) == 0 || b[0] != Progress {
		t.Fatalf("broken %v, want %s first:\n%s", b, Progress, rep.Output)
	}
}

// refusingLocker refuses, without asking the backend, the TryLocks whose
// number among the backend's (counted in n, from 1) refuse picks: a lock
// that loses races inside its own attempt.
type refusingLocker struct {
	locks.Locker
	n      *atomic.Int64
	refuse func(call int64) bool
}

func (l refusingLocker) TryLock(ctx context.Context) (locks.Lease, error) {
	if l.refuse(l.n.Add(1)) {
		return nil, locks.ErrLocked
	}
	return l.Locker.TryLock(ctx)
}

// A single refusal of a free lock is tolerated and counted, not called a
// deadlock.
func TestSpuriousRefusalIsCountedNotADeadlock(t *testing.T) {
	suitemain.SetChecks(t, 30)
	suitemain.SetFlag(t, "rapid.seed", "34")
	rep := Check(t, wrapMemLock(func(l locks.Locker, n *atomic.Int64) locks.Locker {
		return refusingLocker{l, n, func(call int64) bool { return call == 3 }}
	}), Options{})
	if rep.Failed {
		t.Fatalf("a lock that refused a free lock once per run failed:\n%s", rep.Output)
	}
	if rep.SpuriousRefusals == 0 {
		t.Errorf("no spurious refusal counted in %d runs; outcomes %v", rep.Runs, rep.Outcomes)
	}
	t.Logf("%d spurious refusals in %d runs", rep.SpuriousRefusals, rep.Runs)
}

// A lock that refuses a free lock for ever is a deadlock.
func TestRefusingForEverIsADeadlock(t *testing.T) {
	suitemain.SetChecks(t, 30)
	suitemain.SetFlag(t, "rapid.seed", "35")
	rep := Check(t, wrapMemLock(func(l locks.Locker, n *atomic.Int64) locks.Locker {
		return refusingLocker{l, n, func(call int64) bool { return call >= 3 }}
	}), Options{ShrinkRuns: 1})
	if !rep.Failed {
		t.Fatalf("a lock that refuses every TryLock passed %d runs", rep.Runs)
	}
	if b := rep.Broken(); len(b) == 0 || b[0] != DeadlockFreedom {
		t.Fatalf("broken %v, want %s first:\n%s", b, DeadlockFreedom, rep.Output)
	}
}

// The outcome counts add up to the calls the history recorded.
func TestOutcomesAreCounted(t *testing.T) {
	suitemain.SetChecks(t, 5)
	rep := Run(t, memLock(), Options{})
	total := 0
	for _, kind := range outcomeKinds {
		total += rep.Outcomes[kind].Total()
	}
	if total == 0 || rep.Outcomes["TryLock"].OK == 0 || rep.Outcomes["Unlock"].OK == 0 {
		t.Fatalf("outcomes %v over %d runs", rep.Outcomes, rep.Runs)
	}
	if o := rep.Outcomes["Unlock"]; o.Failed != 0 {
		t.Errorf("MemLock's Unlock failed %d times", o.Failed)
	}
	if rep.Checked[Progress] == 0 {
		t.Errorf("progress checked in none of %d runs", rep.Runs)
	}
}
