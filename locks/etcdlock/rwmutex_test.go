package etcdlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

func newRW(t testing.TB, s *etcdfake.Server, opts ...locks.Option) *RWMutex {
	t.Helper()
	m, err := NewRWMutex(s.Client(), "cfg", append(s.LockOptions(), opts...)...)
	if err != nil {
		t.Fatalf("NewRWMutex: %v", err)
	}
	return m
}

func refusedTry(t testing.TB, l *Locker) {
	t.Helper()
	if lease, err := l.TryLock(context.Background()); !errors.Is(err, locks.ErrLocked) {
		if lease != nil {
			_ = lease.Unlock(context.Background())
		}
		t.Fatalf("TryLock: %v, want ErrLocked", err)
	}
}

func TestNewRWMutexValidates(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	if _, err := NewRWMutex(nil, "cfg"); !errors.Is(err, locks.ErrNilClient) {
		t.Errorf("nil client: %v, want ErrNilClient", err)
	}
	m, err := NewRWMutex(s.Client(), "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "cfg" || m.Key() != DefaultRWPrefix+"cfg/" {
		t.Errorf("Name %q, Key %q", m.Name(), m.Key())
	}
}

// TestRWMutexQueue: two readers hold together; a writer queued behind them
// turns a later reader away and queues it behind itself; the readers'
// unlocks let the writer in, its unlock the reader; tokens grow grant by
// grant in either mode.
func TestRWMutexQueue(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	m := newRW(t, s)
	r1, r2 := locktest.MustTryLock(t, m.RLocker()), locktest.MustTryLock(t, newRW(t, s).RLocker())
	if token(t, r2) <= token(t, r1) {
		t.Fatal("the second reader's token is not above the first's")
	}
	refusedTry(t, m.Locker())
	writer := locktest.LockAsync(ctx, newRW(t, s).Locker())
	waitContenders(t, s.Client(), m.RLocker(), 3)
	refusedTry(t, newRW(t, s).RLocker())
	reader := locktest.LockAsync(ctx, newRW(t, s).RLocker())
	waitContenders(t, s.Client(), m.RLocker(), 4)
	locktest.UnlockOnce(t, r1)
	locktest.UnlockOnce(t, r2)
	w := locktest.Receive(t, writer)
	if w.Err != nil {
		t.Fatalf("writer's Lock: %v", w.Err)
	}
	if token(t, w.Lease) <= token(t, r2) {
		t.Fatal("the writer's token is not above the readers'")
	}
	refusedTry(t, newRW(t, s).RLocker())
	locktest.UnlockOnce(t, w.Lease)
	r := locktest.Receive(t, reader)
	if r.Err != nil {
		t.Fatalf("reader's Lock: %v", r.Err)
	}
	if token(t, r.Lease) <= token(t, w.Lease) {
		t.Fatal("the reader's token is not above the writer's")
	}
	locktest.UnlockOnce(t, r.Lease)
	waitContenders(t, s.Client(), m.RLocker(), 0)
}

// TestRWMutexReadersOrOneWriter: goroutines of four clients take read and
// write leases: a writer is never inside with anyone.
func TestRWMutexReadersOrOneWriter(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	var readers, writers []locks.Locker
	for range 2 {
		readers = append(readers, newRW(t, s).RLocker())
		writers = append(writers, newRW(t, s).Locker())
	}
	t.Logf("at most %d readers at once", locktest.ReadersOrOneWriter(t, readers, writers, 2, 10, 100*time.Microsecond))
}
