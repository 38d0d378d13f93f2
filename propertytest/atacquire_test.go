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
	injects  int         // failovers begun
}

// factory is memLock with the failover as its one fault, AtAcquire as
// given, striking around any acquisition.
func (f *losingFailover) factory(atAcquire bool) Factory {
	return f.factoryWhen(atAcquire, StrikeAny)
}

// factoryWhen is factory with the fault's StrikeWhen.
func (f *losingFailover) factoryWhen(atAcquire bool, when Strike) Factory {
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
		be.Faults = []Fault{{Name: "failover", Kind: FaultFailover, AtAcquire: atAcquire, StrikeWhen: when,
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
	if on {
		f.injects++
	}
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

// StrikeWhen narrows the strikes. The failover loses only a grant made on
// a free lock: struck only around acquisitions that start with the lock
// free, it loses one in as many runs as struck around any (the draw at a
// free lock is the same), with fewer failovers (none wasted on a held
// lock, each of which costs seconds on a real cluster); struck only around
// those that start with the lock held, it loses one in far fewer runs
// (then only the Fault action strikes where it can).
func TestStrikeWhenNarrowsTheStrikes(t *testing.T) {
	const runs = 40
	lossRuns, injects := map[Strike]int{}, map[Strike]int{}
	for _, when := range []Strike{StrikeAny, StrikeFree, StrikeHeld} {
		suitemain.SetChecks(t, runs)
		suitemain.SetFlag(t, "rapid.seed", "36")
		suitemain.SetFlag(t, "rapid.steps", "10")
		f := &losingFailover{}
		rep := Check(t, f.factoryWhen(true, when), Options{})
		if rep.Failed {
			t.Fatalf("StrikeWhen %d: a claimed property broke: %v\n%s", when, rep.Broken(), rep.Output)
		}
		lossRuns[when], injects[when] = f.lossRuns, f.injects
		t.Logf("StrikeWhen %d: %d runs, %d failovers, %d of %d acquisitions called during one, a grant lost in %d runs, exclusivity expected in %d",
			when, rep.Runs, f.injects, f.during, f.calls, f.lossRuns, rep.Expected[Exclusivity])
	}
	if lossRuns[StrikeFree]*5 < lossRuns[StrikeAny]*4 || injects[StrikeFree] >= injects[StrikeAny] {
		t.Errorf("striking on a free lock: a grant lost in %d runs with %d failovers; on any: %d runs, %d failovers; want four in five of the runs with fewer failovers",
			lossRuns[StrikeFree], injects[StrikeFree], lossRuns[StrikeAny], injects[StrikeAny])
	}
	if lossRuns[StrikeHeld]*2 > lossRuns[StrikeAny] {
		t.Errorf("striking on a held lock: a grant lost in %d runs, on any: %d; want at most half", lossRuns[StrikeHeld], lossRuns[StrikeAny])
	}
}

// StrikeWhen needs AtAcquire, and one of the three values.
func TestStrikeWhenValidated(t *testing.T) {
	for _, tc := range []struct {
		f    Fault
		want string
	}{
		{Fault{AtAcquire: false, StrikeWhen: StrikeHeld}, "StrikeWhen without AtAcquire"},
		{Fault{AtAcquire: true, StrikeWhen: Strike(7)}, "unknown StrikeWhen 7"},
	} {
		be, err := memLock()(t)
		if err != nil {
			t.Fatal(err)
		}
		f := tc.f
		f.Name, f.Kind = "failover", FaultFailover
		f.Inject, f.Heal = func() error { return nil }, func() error { return nil }
		be.Faults = []Fault{f}
		if err := be.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.want)
		}
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
