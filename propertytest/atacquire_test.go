package propertytest

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// losingFailover is a MemLock behind a primary that fails over: Inject
// stops replication, and Heal promotes a replica, which has lost a grant
// made in between (the lock is free at once), as a Redis failover loses an
// acknowledged, unreplicated SET. It counts the acquisitions called while
// replication was off.
type losingFailover struct {
	mu       sync.Mutex
	mem      *fakes.MemLock
	on, lost bool
	during   int // acquisitions called while the fault was on
	calls    int // acquisitions called
}

// factory is memLock with the failover as its one fault, AtAcquire as
// given.
func (f *losingFailover) factory(atAcquire bool) Factory {
	wrapped := wrapMemLock(func(l locks.Locker, _ *atomic.Int64) locks.Locker {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.mem = l.(*fakes.MemLock)
		return failoverLocker{Locker: l, f: f}
	})
	return func(env Env) (*Backend, error) {
		be, err := wrapped(env)
		if err != nil {
			return nil, err
		}
		be.Faults = []Fault{{Name: "failover", Kind: FaultFailover, AtAcquire: atAcquire,
			Inject: func() error { f.set(true); return nil },
			Heal:   func() error { f.set(false); return nil }}}
		return be, nil
	}
}

// set turns replication off (on) or fails over (off), losing a grant made
// while it was off.
func (f *losingFailover) set(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !on && f.lost {
		f.mem.ExpireNow()
	}
	f.on, f.lost = on, false
}

// called counts an acquisition, and whether the fault was on at its call.
func (f *losingFailover) called() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.on {
		f.during++
	}
	return f.on
}

// granted marks a grant made while replication was off, if on.
func (f *losingFailover) granted(on bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on && err == nil && f.on {
		f.lost = true
	}
}

// failoverLocker is the MemLock seen through losingFailover.
type failoverLocker struct {
	locks.Locker
	f *losingFailover
}

func (l failoverLocker) TryLock(ctx context.Context) (locks.Lease, error) {
	on := l.f.called()
	lease, err := l.Locker.TryLock(ctx)
	l.f.granted(on, err)
	return lease, err
}

func (l failoverLocker) Lock(ctx context.Context) (locks.Lease, error) {
	on := l.f.called()
	lease, err := l.Locker.Lock(ctx)
	l.f.granted(on, err)
	return lease, err
}

// A fault marked AtAcquire strikes around acquisitions: a failover that
// loses a grant made during it shows as an expected exclusivity violation
// in three times as many runs as the same fault struck only by the Fault
// action; the lock does not claim a failover, so nothing fails.
func TestFaultAtAcquireStrikesAroundAcquisitions(t *testing.T) {
	const runs = 40
	expected := map[bool]int{}
	for _, atAcquire := range []bool{false, true} {
		suitemain.SetChecks(t, runs)
		suitemain.SetFlag(t, "rapid.seed", "35")
		suitemain.SetFlag(t, "rapid.steps", "10")
		f := &losingFailover{}
		rep := Check(t, f.factory(atAcquire), Options{})
		if rep.Failed {
			t.Fatalf("AtAcquire %v: a claimed property broke: %v\n%s", atAcquire, rep.Broken(), rep.Output)
		}
		expected[atAcquire] = rep.Expected[Exclusivity]
		t.Logf("AtAcquire %v: %d runs, %d of %d acquisitions called during the fault, exclusivity expected in %d",
			atAcquire, rep.Runs, f.during, f.calls, expected[atAcquire])
		if atAcquire && f.during*2 < f.calls {
			t.Errorf("AtAcquire: %d of %d acquisitions called during the fault, want at least half", f.during, f.calls)
		}
	}
	// Runs in manual time are short, and most acquisitions meet a held
	// lock: a quarter of them is the bar, where the Fault action alone
	// makes a tenth.
	if expected[true]*4 < runs || expected[true] < 2*expected[false] {
		t.Errorf("exclusivity expected in %d of %d runs with AtAcquire, %d without: want a quarter, and twice as many",
			expected[true], runs, expected[false])
	}
}

// An AtAcquire fault needs a Heal, which ends it once the acquisition is
// done.
func TestAtAcquireFaultNeedsAHeal(t *testing.T) {
	be, err := memLock()(t)
	if err != nil {
		t.Fatal(err)
	}
	be.Faults = []Fault{{Name: "failover", Kind: FaultFailover, AtAcquire: true, Inject: func() error { return nil }}}
	if err := be.validate(); err == nil || !strings.Contains(err.Error(), "AtAcquire without a Heal") {
		t.Errorf("an AtAcquire fault without Heal: %v", err)
	}
}
