package lockbench_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/lockbench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func memWorkers(t *testing.T, n int) []lockbench.Worker {
	t.Helper()
	l, err := fakes.NewMemLock("bench", locks.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ws := make([]lockbench.Worker, n)
	for i := range ws {
		ws[i] = lockbench.FromLocker(l)
	}
	return ws
}

func TestContendTurnsHandsToOthers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := lockbench.Contend(ctx, memWorkers(t, 4), lockbench.Contention{Acquisitions: 200, Turns: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Acquisitions != 200 || len(res.Waits) != 200 || len(res.Handoffs) == 0 {
		t.Fatalf("result %d acquisitions, %d waits, %d hand-offs", res.Acquisitions, len(res.Waits), len(res.Handoffs))
	}
	if res.SelfHandoffs != 0 {
		t.Fatalf("%d hand-offs back to the releaser in turns mode", res.SelfHandoffs)
	}
	if res.AcqPerSec() <= 0 || lockbench.Percentile(res.Handoffs, 99) < lockbench.Percentile(res.Handoffs, 50) {
		t.Fatalf("bad statistics: %v acq/s", res.AcqPerSec())
	}
}

func TestContendStopsAtTheBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := lockbench.Contend(ctx, memWorkers(t, 4), lockbench.Contention{
		Acquisitions: 1 << 30, Hold: time.Millisecond, Budget: 50 * time.Millisecond, Turns: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Acquisitions < 1 || res.Acquisitions >= 1<<30 || len(res.Waits) != res.Acquisitions {
		t.Fatalf("%d acquisitions (%d waits) within a 50 ms budget", res.Acquisitions, len(res.Waits))
	}
}

// brokenWorker never excludes anyone.
type brokenWorker struct{}

func (brokenWorker) Lock(context.Context) error   { return nil }
func (brokenWorker) Unlock(context.Context) error { return nil }

func TestContendCatchesABrokenLock(t *testing.T) {
	ws := []lockbench.Worker{brokenWorker{}, brokenWorker{}, brokenWorker{}, brokenWorker{}}
	_, err := lockbench.Contend(context.Background(), ws, lockbench.Contention{Acquisitions: 4000, Hold: 20 * time.Microsecond})
	if !errors.Is(err, lockbench.ErrExclusion) {
		t.Fatalf("a lock that excludes nobody: %v, want ErrExclusion", err)
	}
}

type failingWorker struct{}

func (failingWorker) Lock(context.Context) error   { return errors.New("boom") }
func (failingWorker) Unlock(context.Context) error { return nil }

func TestContendReportsErrorsAndBadInput(t *testing.T) {
	ws := []lockbench.Worker{failingWorker{}, failingWorker{}}
	if _, err := lockbench.Contend(context.Background(), ws, lockbench.Contention{Acquisitions: 10, Turns: true}); err == nil {
		t.Fatal("Contend with failing workers succeeded")
	}
	for _, c := range []lockbench.Contention{{}, {Acquisitions: 1, Hold: -1}, {Acquisitions: 1, Budget: -1}, {Acquisitions: 1, Turns: true}} {
		if _, err := lockbench.Contend(context.Background(), ws[:1], c); err == nil {
			t.Errorf("Contend(%+v) with one worker accepted", c)
		}
	}
}

func TestUncontendedAndPercentile(t *testing.T) {
	lat, err := lockbench.Uncontended(context.Background(), memWorkers(t, 1)[0], 50)
	if err != nil || len(lat) != 50 {
		t.Fatalf("%d latencies, %v", len(lat), err)
	}
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if lockbench.Percentile(d, 50) != 5 || lockbench.Percentile(d, 100) != 10 || lockbench.Percentile(nil, 50) != 0 {
		t.Fatal("Percentile")
	}
}

func Example() {
	l, _ := fakes.NewMemLock("orders", locks.WithTTL(time.Minute))
	ws := []lockbench.Worker{lockbench.FromLocker(l), lockbench.FromLocker(l)}
	res, err := lockbench.Contend(context.Background(), ws, lockbench.Contention{Acquisitions: 100, Turns: true})
	fmt.Println(res.Acquisitions, res.SelfHandoffs, err)
	// Output: 100 0 <nil>
}
