package zklock

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestSweepPausesStayShort: sweep's pause grows from its least to its
// longest and no further, and is short after a try that looked closed, so
// that a sweep whose connection its owner closes ends within the longest
// pause and sweepClosed short ones (CI once caught one still asleep in a
// half-second pause when its package's goroutine-leak check ran).
func TestSweepPausesStayShort(t *testing.T) {
	prev := time.Duration(0)
	for tries := 1; tries <= 40; tries++ {
		p := sweepPause(tries, false)
		if p < sweepPauseMin || p > sweepPauseMax {
			t.Fatalf("pause after %d tries is %v, outside [%v, %v]", tries, p, sweepPauseMin, sweepPauseMax)
		}
		if p < prev {
			t.Fatalf("pause after %d tries is %v, shorter than the one before (%v)", tries, p, prev)
		}
		prev = p
		if c := sweepPause(tries, true); c != sweepPauseClosed {
			t.Fatalf("pause after %d tries, the last closed-like, is %v, want %v", tries, c, sweepPauseClosed)
		}
	}
	if prev != sweepPauseMax {
		t.Fatalf("the pause never reaches its longest: %v after 40 tries, want %v", prev, sweepPauseMax)
	}
	if worst := sweepPauseMax + sweepClosed*sweepPauseClosed; worst > 200*time.Millisecond {
		t.Fatalf("a closed connection may keep a sweep up to %v", worst)
	}
}

// TestSweepEndsWithItsClosedConnection: a clean-up that cannot settle
// (here a try that fails as go-zookeeper does while no server answers)
// goes on until its connection is closed by its owner, and then ends: the
// try sees the connection closed sweepClosed times in a row.
func TestSweepEndsWithItsClosedConnection(t *testing.T) {
	s := server(t)
	conn := s.connect(t)
	l := s.newLocker(t, conn, "sweep")
	var tries, closedTries atomic.Int32
	try := func() error {
		n := tries.Add(1)
		if n <= 4 {
			return zk.ErrNoServer // not settled: the sweep goes on
		}
		if n == 5 {
			conn.Close()
		}
		_, err := conn.Sync("/")
		if err == zk.ErrConnectionClosed {
			closedTries.Add(1)
		}
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.sweep(try)
	}()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatalf("the sweep goes on %v after its connection was closed (%d tries)", testTimeout, tries.Load())
	}
	if got := closedTries.Load(); got < sweepClosed {
		t.Fatalf("the sweep ended after %d tries that saw the connection closed, want at least %d", got, sweepClosed)
	}
}

// TestClosedCountTellsAFlapFromAClose: tries sent while connected that fail
// as the connection drops never add up to a close; tries sent on a closed
// (disconnected) connection do; anything else starts the count again.
func TestClosedCountTellsAFlapFromAClose(t *testing.T) {
	flap, closed := 0, 0
	for i := range 2 * sweepClosed {
		flap = closedCount(zk.StateHasSession, zk.StateDisconnected, zk.ErrConnectionClosed, flap)
		if flap != 0 {
			t.Fatalf("try %d of a flapping connection counted as closed (%d)", i+1, flap)
		}
		closed = closedCount(zk.StateDisconnected, zk.StateDisconnected, zk.ErrConnectionClosed, closed)
		if closed != i+1 {
			t.Fatalf("try %d on a closed connection counted %d, want %d", i+1, closed, i+1)
		}
	}
	for _, tc := range []struct {
		before, after zk.State
		err           error
	}{
		{zk.StateDisconnected, zk.StateDisconnected, zk.ErrNoServer},
		{zk.StateDisconnected, zk.StateConnecting, zk.ErrConnectionClosed},
		{zk.StateConnecting, zk.StateDisconnected, zk.ErrConnectionClosed},
		{zk.StateDisconnected, zk.StateDisconnected, nil},
	} {
		if got := closedCount(tc.before, tc.after, tc.err, sweepClosed-1); got != 0 {
			t.Errorf("closedCount(%v, %v, %v) after %d = %d, want 0", tc.before, tc.after, tc.err, sweepClosed-1, got)
		}
	}
}
