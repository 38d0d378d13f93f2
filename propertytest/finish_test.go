package propertytest

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
)

// The faults still active at the end of a run heal in the order of their
// index in every replay (Redlock on five nodes ends a run with up to two
// nodes down).
func TestFinishHealsTheFaultsInOrder(t *testing.T) {
	for range 20 {
		be, err := memLock()(t)
		if err != nil {
			t.Fatal(err)
		}
		var healed []int
		for i := range 4 {
			be.Faults = append(be.Faults, Fault{Name: "fault " + string(rune('0'+i)), Kind: FaultNodeDown,
				Inject: func() error { return nil }, Heal: func() error { healed = append(healed, i); return nil }})
		}
		o, err := (Options{Clients: 2, TTL: time.Second, Name: "x", Claims: []FaultKind{FaultCrash, FaultNodeDown}}).withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		m, err := newMachine(o, be, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{2, 0, 3, 1} {
			if err := m.toggleFault(i); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.finish(); err != nil {
			t.Fatal(err)
		}
		if want := []int{0, 1, 2, 3}; !slices.Equal(healed, want) {
			t.Fatalf("healed %v, want %v", healed, want)
		}
	}
}

// dispatchRecorder is a clock with SetDispatch that records the dispatch
// it is given; as a ManualClock it also has Advance.
type dispatchRecorder struct {
	*fakes.Clock
	run func(fs []func())
}

func (c *dispatchRecorder) SetDispatch(run func(fs []func())) { c.run = run }

// noAdvance has SetDispatch but no Advance: no ManualClock.
type noAdvance struct {
	locks.Clock
	rec *dispatchRecorder
}

func (c noAdvance) SetDispatch(run func(fs []func())) { c.rec.SetDispatch(run) }

// A Backend.Clock that is a ManualClock gets the scheduler's dispatch,
// which starts every callback it is given; a clock that is not one (here,
// without Advance) is left alone.
func TestManualClockGetsTheSchedulersDispatch(t *testing.T) {
	for _, manual := range []bool{true, false} {
		be, err := memLock()(t)
		if err != nil {
			t.Fatal(err)
		}
		rec := &dispatchRecorder{Clock: be.Clock.(*fakes.Clock)}
		be.Clock = rec
		if !manual {
			be.Clock = noAdvance{Clock: rec.Clock, rec: rec}
		}
		o, err := (Options{Clients: 2, TTL: time.Second, Name: "x"}).withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		m, err := newMachine(o, be, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !manual {
			if rec.run != nil {
				t.Error("a clock without Advance was given the scheduler's dispatch")
			}
		} else if rec.run == nil {
			t.Error("a ManualClock was not given the scheduler's dispatch")
		} else {
			var ran atomic.Int32
			rec.run([]func(){func() { ran.Add(1) }, func() { ran.Add(1) }})
			if n := ran.Load(); n != 2 {
				t.Errorf("the dispatch ran %d of 2 callbacks", n)
			}
		}
		if err := m.finish(); err != nil {
			t.Fatal(err)
		}
	}
}
