package propertytest

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
)

// An operation that passes a point and then sends a request to every node
// at once (Redlock's Unlock and Renew: the lease's PointBeforeUnlock or
// PointBeforeRenew, then a release or a renewal on each node) has its
// requests let go in the order of their names, node 0's first, as before
// a first point: the scheduler waits until every request has come to the
// gate. Counting the point as the operation's first request, it let the
// first request that came go at once, whichever node's the Go runtime
// readied first, and a stall after one request stopped a different node
// in each replay.
func TestRequestsAfterAPointGoInOrder(t *testing.T) {
	for range 20 {
		s := newSched(0, true)
		o := s.start(0, "Unlock", 0, 2, func(ctx context.Context) {
			locks.GateRequest(ctx, pointGate+"before-unlock")()
			var wg sync.WaitGroup
			for i := 2; i >= 0; i-- { // node 2's first: it tends to come first
				wg.Go(func() { locks.GateRequest(ctx, fmt.Sprintf("redis node %d: EVALSHA", i))() })
			}
			wg.Wait()
		})
		if st := s.run(o, false); st != opParked || !s.stalled(o) {
			t.Fatalf("the operation did not stall after its point and one request (state %v)", st)
		}
		s.mu.Lock()
		var left []string
		for _, r := range o.parked {
			left = append(left, r.what)
		}
		s.mu.Unlock()
		slices.Sort(left)
		if want := []string{"redis node 1: EVALSHA", "redis node 2: EVALSHA"}; !slices.Equal(left, want) {
			t.Fatalf("after the point and one request, parked %q, want %q: node 0's request did not go first", left, want)
		}
		s.crash(o)
	}
}

// A request to a stopped miniredis node fails before the process is
// quiescent. go-redis retries a refused dial; while the fakes' clients
// backed off 1-4 ms of wall time between the attempts, every goroutine
// stood blocked on a timer and the scheduler took that for quiescence: a
// Redlock attempt with a node down looked blocked, went on by itself a
// moment later, and two replays of a seed parted at the next step.
func TestRequestToAStoppedNodeEndsBeforeQuiescence(t *testing.T) {
	g, err := redisfake.StartCluster(1, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c := g.NewClients()[0]
	key := g.Prefix() + "k"
	if err := c.Set(context.Background(), key, "v", 0).Err(); err != nil { // a pooled connection, closed by the stop
		t.Fatal(err)
	}
	g.Stop(0)
	for i := range 10 {
		s := newSched(0, true)
		var got error
		o := s.start(0, "Lock", 0, stallNever, func(ctx context.Context) { got = c.Get(ctx, key).Err() })
		if st := s.run(o, true); st != opFinished {
			t.Fatalf("request %d to the stopped node had not ended when the process looked quiescent (state %d)", i, st)
		}
		if got == nil {
			t.Fatalf("request %d to the stopped node succeeded", i)
		}
	}
}

// Once a signal.Notify has started os/signal's receiver, which waits in a
// system call for the rest of the process, an in-process run's snapshot
// still finds the process quiet: the receiver is counted when the run
// begins and not taken for a goroutine about to move. (Taken for one,
// every wait for quiescence fell to the slow path for the rest of the
// process.)
func TestSignalReceiverDoesNotKeepTheRunBusy(t *testing.T) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR2)
	signal.Stop(ch)
	s := newSched(0, true)
	if s.parked != 1 {
		t.Fatalf("%d goroutines parked in a system call counted, want os/signal's receiver:\n%s", s.parked, textSnapshot())
	}
	var busy bool
	for range 100 { // another test's goroutine may still be winding down
		if _, busy = s.snapshot(nil); !busy {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if busy {
		t.Fatal("the snapshot stays busy with only the signal receiver in a system call")
	}
	if n := signalReceivers("goroutine 6 [syscall]:\nos/signal.signal_recv()\n\t/x/sigqueue.go:152\nos/signal.loop()\n"); n != 1 {
		t.Errorf("one receiver in a stack text counted %d times", n)
	}
	if n := signalReceivers("goroutine 6 [select]:\nmain.f()\n"); n != 0 {
		t.Errorf("no receiver counted %d", n)
	}
}
