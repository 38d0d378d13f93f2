package propertytest

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redlock"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// TestMain runs with the suite's short defaults and leak check (see
// suitemain.Main); LOCKPROOF_DEEP=1 runs 500 checks per property test.
//
// The tests of the scheduler's wall-time limits mostly wait for them: they
// run in a second process (suitemain.Beside), beside the others, whose
// manual-time runs need the process to themselves. TestBeside collects
// them.
func TestMain(m *testing.M) {
	suitemain.Main(m, suitemain.Beside(`^Test(RestlessGoroutineEndsTheRun|WallTimePoller|LockIgnoringItsContextEndsTheRun|SchedWaitsAreBounded)`))
}

// TestBeside collects the tests TestMain runs in a second process.
func TestBeside(t *testing.T) { suitemain.Collect(t) }

// epoch is where the manual clocks of this package's tests start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// memLock is the Factory the core's own tests run on, the equivalent of
// backends.MemLock, which they cannot import (it imports this package):
// the first Locker made is a fakes.MemLock that every client then shares.
func memLock() Factory {
	return func(Env) (*Backend, error) {
		clock := fakes.NewClock(epoch)
		be := &Backend{Clock: clock, Advance: clock.Advance, InProcess: true}
		var l *fakes.MemLock
		be.NewLocker = func(name string, opts ...locks.Option) (locks.Locker, error) {
			var err error
			if l == nil {
				l, err = fakes.NewMemLock(name, append([]locks.Option{locks.WithClock(clock)}, opts...)...)
			}
			return l, err
		}
		return be, nil
	}
}

// redlockOf3 is Redlock on three miniredis nodes in manual time, with the
// node controls of backends.Redlock(3) and none of its faults.
func redlockOf3(t *testing.T) *Backend {
	g, err := redisfake.StartCluster(3, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return &Backend{
		NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
			return redlock.New(g.NewClients(), name, append(g.LockOptions(), opts...)...)
		},
		Clock: g.Clock(), Advance: g.Advance, InProcess: true,
		Nodes: 3, StopNode: g.Stop, StartNode: func(i int) { g.Restart(i, true) },
	}
}
