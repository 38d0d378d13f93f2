// Package locktest holds the small helpers that the tests and benchmarks of
// every lock in lockproof share, and those of the fakes. It sits at the
// module root (not under locks/) so that the fakes' tests may import it;
// it must not import fakes.
package locktest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/lockbench"
)

// LockTimeout bounds MustLock, so that a lock that never comes fails the
// test instead of hanging it.
const LockTimeout = 20 * time.Second

// MustLock locks l within LockTimeout or fails the test.
func MustLock(t testing.TB, l locks.Locker) locks.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), LockTimeout)
	defer cancel()
	lease, err := l.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	return lease
}

// MustTryLock takes l with one TryLock or fails the test.
func MustTryLock(t testing.TB, l locks.Locker) locks.Lease {
	t.Helper()
	lease, err := l.TryLock(context.Background())
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	return lease
}

// Token returns lease's fencing token, failing the test if it has no safe one.
func Token(t testing.TB, lease locks.Lease) locks.Token {
	t.Helper()
	tok, ok := lease.Token()
	if !ok {
		t.Fatalf("lease of %q has no fencing token", lease.Name())
	}
	return tok
}

// PercentileMs returns the p-th percentile (nearest rank) of sorted, in
// milliseconds; 0 when there are no samples.
func PercentileMs(sorted []time.Duration, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100 // ceil(n·p/100), a 1-based rank
	i = min(max(i, 1), len(sorted))
	return float64(sorted[i-1]) / float64(time.Millisecond)
}

// FencedIncrements locks l rounds times and, each time, increments fence's
// value through the lease's token before unlocking: the read-modify-write
// a lock must protect. inside counts holders across every caller sharing it;
// two at once is an error, as is a fenced access refused, a lock or unlock
// error, or timeout running out.
func FencedIncrements(l locks.Locker, fence *locks.Fence[int], inside *atomic.Int32, rounds int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for range rounds {
		lease, err := l.Lock(ctx)
		if err != nil {
			return err
		}
		if n := inside.Add(1); n != 1 {
			return fmt.Errorf("%d holders at once", n)
		}
		tok, _ := lease.Token()
		v, err := fence.Read(tok)
		if err == nil {
			err = fence.Write(tok, v+1)
		}
		inside.Add(-1)
		if err != nil {
			return err
		}
		if err := lease.Unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}

// UnlockOnce unlocks lease and checks that it cannot be used again: a
// second Unlock and a Renew both return locks.ErrReleased.
func UnlockOnce(t testing.TB, lease locks.Lease) {
	t.Helper()
	ctx := context.Background()
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := lease.Unlock(ctx); !errors.Is(err, locks.ErrReleased) {
		t.Fatalf("double unlock: %v, want ErrReleased", err)
	}
	if err := lease.Renew(ctx); !errors.Is(err, locks.ErrReleased) {
		t.Fatalf("renew after unlock: %v, want ErrReleased", err)
	}
}

// Result is what a Lock started by LockAsync returned.
type Result struct {
	Lease locks.Lease
	Err   error
}

// LockAsync runs l.Lock(ctx) in a goroutine; the channel receives its
// result.
func LockAsync(ctx context.Context, l locks.Locker) <-chan Result {
	ch := make(chan Result, 1)
	go func() {
		lease, err := l.Lock(ctx)
		ch <- Result{lease, err}
	}()
	return ch
}

// Receive waits for the result of a LockAsync, on the wall clock, or fails
// the test after LockTimeout.
func Receive(t testing.TB, ch <-chan Result) Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(LockTimeout):
		t.Fatal("Lock did not return")
		return Result{}
	}
}

// Closed waits for ch to close, on the wall clock, or fails the test after
// LockTimeout; what names the channel in the failure ("Done").
func Closed(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(LockTimeout):
		t.Fatalf("%s did not close within %v", what, LockTimeout)
	}
}

// ExpiredFromOutside checks a backend's control that ends a held lease from
// outside the lock (a fake's ExpireLock, which finds the lock's state
// through the lock's exported layout): expire succeeds, the lease can no
// longer be renewed and its Done closes (so no goroutine of the lease
// outlives the test), and a second expire fails with an error wrapping
// noHolder, as nobody holds the lock any more. So a fake that looks for the
// lock in the wrong place fails the test. (Renew's error is not checked
// further: zklock's, right after its session expired, can be go-zookeeper's
// "connection closed" rather than locks.ErrNotHeld.)
func ExpiredFromOutside(t testing.TB, lease locks.Lease, expire func(context.Context) error, noHolder error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), LockTimeout)
	defer cancel()
	if err := expire(ctx); err != nil {
		t.Fatalf("expire the held lease: %v", err)
	}
	if err := lease.Renew(ctx); err == nil {
		t.Fatal("Renew succeeded after the lease was expired")
	}
	Closed(t, "Done", lease.Done())
	if err := expire(ctx); !errors.Is(err, noHolder) {
		t.Fatalf("expire with nobody holding = %v, want %v", err, noHolder)
	}
}

// Cycles locks and unlocks w n times, failing t at the first error: the
// loop of the uncontended comparison benchmarks (and, with n 1, their
// warm-up: a session, a connection, the lock's node).
func Cycles(t testing.TB, ctx context.Context, w lockbench.Worker, n int) {
	t.Helper()
	for i := range n {
		if err := w.Lock(ctx); err != nil {
			t.Fatalf("lock %d of %d: %v", i+1, n, err)
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatalf("unlock %d of %d: %v", i+1, n, err)
		}
	}
}

// Uncontended is the body of the uncontended comparison benchmarks: a
// warm-up cycle (a session, a connection, the lock's node), then b.N
// timed lock+unlock cycles of w, reporting allocations and requests per
// cycle (reqs/op) as requests, the count of the worker's client, moved.
func Uncontended(b *testing.B, ctx context.Context, w lockbench.Worker, requests func() int64) {
	b.Helper()
	Cycles(b, ctx, w, 1)
	before := requests()
	b.ReportAllocs()
	b.ResetTimer()
	Cycles(b, ctx, w, b.N)
	b.StopTimer()
	b.ReportMetric(float64(requests()-before)/float64(b.N), "reqs/op")
}

// ReportContention reports what the handoff comparison benchmarks share of
// a lockbench.Contend result: the hand-off latency's median and 99th
// percentile (handoff-p50-ms, handoff-p99-ms) and the acquisition rate
// (acq/s).
func ReportContention(b *testing.B, res lockbench.Result) {
	b.ReportMetric(PercentileMs(res.Handoffs, 50), "handoff-p50-ms")
	b.ReportMetric(PercentileMs(res.Handoffs, 99), "handoff-p99-ms")
	b.ReportMetric(res.AcqPerSec(), "acq/s")
}
