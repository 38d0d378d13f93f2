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
// replication was off, and the runs in which a failover lost a grant.
type losingFailover struct {
	mu       sync.Mutex
	mem      *fakes.MemLock
	on       bool
	lost     locks.Token // the last grant made while the fault was on; 0: none
	during   int         // acquisitions called while the fault was on
	calls    int         // acquisitions called
	lossRuns int         // runs in which a failover lost a grant
	lostRun  bool        // this run's failovers lost a grant
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
		f.mu.Lock()
		f.lostRun = false
		f.mu.Unlock()
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
	if tok, held := f.mem.Holder(); !on && f.lost != 0 && held && tok == f.lost {
		f.mem.ExpireNow()
		if !f.lostRun {
			f.lossRuns, f.lostRun = f.lossRuns+1, true
		}
	}
	f.on, f.lost = on, 0
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
func (f *losingFailover) granted(on bool, lease locks.Lease, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on && err == nil && f.on {
		f.lost, _ = lease.Token()
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
	l.f.granted(on, lease, err)
	return lease, err
}

func (l failoverLocker) Lock(ctx context.Context) (locks.Lease, error) {
	on := l.f.called()
	lease, err := l.Locker.Lock(ctx)
	l.f.granted(on, lease, err)
	return lease, err
}

// A fault marked AtAcquire strikes around acquisitions: a failover that
// loses a grant made during it shows as an expected exclusivity violation
// in three times as many runs as the same fault struck only by the Fault
// action, and in nearly every run in which it lost a grant (the probe
// contends right after each heal, contendAfter: without it, half); the lock
// does not claim a failover, so nothing fails.
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
		t.Logf("AtAcquire %v: %d runs, %d of %d acquisitions called during the fault, a grant lost in %d runs, exclusivity expected in %d",
			atAcquire, rep.Runs, f.during, f.calls, f.lossRuns, expected[atAcquire])
		if atAcquire && f.during*2 < f.calls {
			t.Errorf("AtAcquire: %d of %d acquisitions called during the fault, want at least half", f.during, f.calls)
		}
		// A holder that crashed or let go before the heal leaves nothing
		// for the loss to break: nearly every run, not all.
		if atAcquire && expected[true]*5 < f.lossRuns*4 {
			t.Errorf("AtAcquire: a failover lost a grant in %d runs, and exclusivity was expected in %d: want four in five (the probe contends after each heal)",
				f.lossRuns, expected[true])
		}
	}
	// Runs in manual time are short, and most acquisitions meet a held
	// lock: a third of them is the bar, where the Fault action alone
	// makes a tenth.
	if expected[true]*3 < runs || expected[true] < 2*expected[false] {
		t.Errorf("exclusivity expected in %d of %d runs with AtAcquire, %d without: want a third, and twice as many",
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
