package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/mysqlfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// newServer starts the MySQL fake (or the real server of
// mysqlfake.EnvDSN) and creates the default lock table on it.
func newServer(t testing.TB) *mysqlfake.Server {
	t.Helper()
	s := mysqlfake.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := CreateTable(ctx, s.DB(), ""); err != nil {
		t.Fatal(err)
	}
	return s
}

// openDB opens another pool on s, as another process would have.
func openDB(t testing.TB, s *mysqlfake.Server) *sql.DB {
	t.Helper()
	db, err := s.OpenDB()
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func newLocker(t testing.TB, db *sql.DB, name string, opts ...locks.Option) *Locker {
	t.Helper()
	l, err := New(db, name, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// TestExclusionThroughFence: 16 goroutines in 4 "processes" (each its own
// connection pool and Locker) × 20 acquisitions (50 with LOCKPROOF_DEEP=1),
// each a read-modify-write through a Fence. No update may be lost and no
// write refused. 20 rounds still catch a take-over that ignores a live
// holder within its first rounds.
func TestExclusionThroughFence(t *testing.T) {
	s := newServer(t)
	const procs, perProc = 4, 4
	rounds := 20
	if os.Getenv("LOCKPROOF_DEEP") == "1" {
		rounds = 50
	}
	var fence locks.Fence[int]
	var wg sync.WaitGroup
	errs := make(chan error, procs*perProc)
	for p := range procs {
		l := newLocker(t, openDB(t, s), "counter")
		for range perProc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				for i := range rounds {
					lease, err := l.Lock(ctx)
					if err != nil {
						errs <- fmt.Errorf("process %d round %d: %w", p, i, err)
						return
					}
					tok := locktest.Token(t, lease)
					v, err := fence.Read(tok)
					if err == nil {
						err = fence.Write(tok, v+1)
					}
					if err != nil {
						errs <- fmt.Errorf("process %d round %d: fenced write refused: %w", p, i, err)
					}
					if err := lease.Unlock(ctx); err != nil {
						errs <- fmt.Errorf("process %d round %d: unlock: %w", p, i, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got, want := fence.Value(), procs*perProc*rounds; got != want {
		t.Fatalf("counter = %d after %d acquisitions: updates were lost", got, want)
	}
}

// TestCrashedHolderTakenOver: the holder stops renewing and never unlocks;
// once its row expires (on the server's clock, forced by the fake) a waiter
// takes over with a higher token, and the stale holder's renew, unlock and
// fenced write are all refused.
func TestCrashedHolderTakenOver(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	crashed := newLocker(t, s.DB(), "job", locks.WithWatchdog(false))
	waiter := newLocker(t, openDB(t, s), "job")
	var fence locks.Fence[string]

	old := locktest.MustLock(t, crashed)
	oldTok := locktest.Token(t, old)
	if err := fence.Write(oldTok, "old"); err != nil {
		t.Fatal(err)
	}
	got := make(chan locks.Lease, 1)
	go func() { got <- locktest.MustLock(t, waiter) }()
	if err := s.ExpireLock(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	lease := <-got
	defer lease.Unlock(ctx)
	newTok := locktest.Token(t, lease)
	if newTok <= oldTok {
		t.Fatalf("new token %v not above the stale one %v", newTok, oldTok)
	}
	if _, err := fence.Read(newTok); err != nil {
		t.Fatal(err)
	}
	if err := fence.Write(oldTok, "stale"); !errors.Is(err, locks.ErrStaleToken) {
		t.Fatalf("stale fenced write: %v, want ErrStaleToken", err)
	}
	if err := old.Renew(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("stale Renew: %v, want ErrNotHeld", err)
	}
	<-old.Done()
	if err := old.Unlock(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("stale Unlock: %v, want ErrNotHeld", err)
	}
	if _, err := waiter.TryLock(ctx); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock while the new holder holds: %v, want ErrLocked", err)
	}
}

// TestRowKeptFenceGrows: release keeps the row, so tokens keep growing
// across releases; one row per lock name.
func TestRowKeptFenceGrows(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	l := newLocker(t, s.DB(), "res")
	var last locks.Token
	for i := range 3 {
		lease, err := l.TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock %d: %v", i, err)
		}
		if tok := locktest.Token(t, lease); tok <= last {
			t.Fatalf("token %v after %v: not increasing", tok, last)
		} else {
			last = tok
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var rows int
	if err := s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM "+DefaultTable).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Fatalf("%d rows for one lock, want 1", rows)
	}
}

// TestForeignOwner: renew and release by an owner that does not hold the
// lock return ErrNotHeld and leave the lock held.
func TestForeignOwner(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	l := newLocker(t, s.DB(), "res")
	lease := locktest.MustLock(t, l)
	defer lease.Unlock(ctx)
	foreign := leaseOps{l: l, owner: locks.NewOwner()}
	if err := foreign.Renew(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("foreign Renew: %v, want ErrNotHeld", err)
	}
	if err := foreign.Release(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("foreign Release: %v, want ErrNotHeld", err)
	}
	if _, err := l.TryLock(ctx); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock after foreign attempts: %v, want ErrLocked", err)
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("owner's Renew: %v", err)
	}
}

// TestRenewExtendsOnServer: a renewal moves the row's expiry to a full TTL
// from the server's now.
func TestRenewExtendsOnServer(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	const ttl = time.Hour
	l := newLocker(t, s.DB(), "res", locks.WithTTL(ttl), locks.WithWatchdog(false))
	lease := locktest.MustLock(t, l)
	defer lease.Unlock(ctx)
	if _, err := s.DB().ExecContext(ctx, "UPDATE "+DefaultTable+" SET expires_at = NOW(6) + INTERVAL 1 MINUTE"); err != nil {
		t.Fatal(err)
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	var left int64
	if err := s.DB().QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) FROM "+DefaultTable).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(left) * time.Microsecond; got < ttl-time.Minute || got > ttl {
		t.Fatalf("after Renew the row expires in %v, want about %v", got, ttl)
	}
}

// TestLeaseLifecycleErrors: double unlock, unlock and renew after the local
// deadline, each a clear error.
func TestLeaseLifecycleErrors(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	clock := fakes.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const ttl = time.Second
	l := newLocker(t, s.DB(), "res", locks.WithTTL(ttl), locks.WithWatchdog(false), locks.WithClock(clock))

	locktest.UnlockOnce(t, locktest.MustLock(t, l))

	lease := locktest.MustLock(t, l)
	clock.Advance(ttl)
	<-lease.Done()
	if err := lease.Renew(ctx); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("Renew after expiry: %v, want ErrLeaseExpired", err)
	}
	if err := lease.Unlock(ctx); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("Unlock after expiry: %v, want ErrLeaseExpired", err)
	}
	// The owner-checked release was still sent: the row is free.
	again, err := l.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the expired lease's Unlock: %v", err)
	}
	_ = again.Unlock(ctx)
}

// TestWaitEnds: a waiting Lock ends with ctx, with the wait budget, and not
// at all with an already cancelled ctx.
func TestWaitEnds(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	holder := newLocker(t, s.DB(), "res")
	lease := locktest.MustLock(t, holder)
	defer lease.Unlock(ctx)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := holder.Lock(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a cancelled ctx: %v", err)
	}
	if _, err := holder.TryLock(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("TryLock with a cancelled ctx: %v", err)
	}

	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := holder.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its ctx deadline: %v", err)
	}

	clock := fakes.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	budgeted := newLocker(t, s.DB(), "res", locks.WithWaitBudget(time.Second), locks.WithClock(clock))
	done := make(chan error, 1)
	go func() { _, err := budgeted.Lock(ctx); done <- err }()
	giveUp := time.Now().Add(20 * time.Second)
	for time.Now().Before(giveUp) {
		select {
		case err := <-done:
			if !errors.Is(err, locks.ErrWaitBudget) {
				t.Fatalf("Lock past its wait budget: %v, want ErrWaitBudget", err)
			}
			if waited := clock.Now().Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); waited > 2*time.Second {
				t.Fatalf("the budget of 1s ended after %v of waiting", waited)
			}
			return
		default:
		}
		// Advance only once the waiter sleeps on a timer.
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		if clock.WaitTimers(wctx, 1) == nil {
			clock.Advance(300 * time.Millisecond)
		}
		cancel()
	}
	t.Fatal("Lock with a wait budget of 1s did not return")
}

// TestBadInput: each a clear error, never a panic.
func TestBadInput(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	cases := []struct {
		name string
		make func() error
		want error
	}{
		{"nil db", func() error { _, err := New(nil, "x"); return err }, locks.ErrNilClient},
		{"empty name", func() error { _, err := New(s.DB(), ""); return err }, locks.ErrInvalidName},
		{"long name", func() error { _, err := New(s.DB(), strings.Repeat("x", locks.MaxNameLen+1)); return err }, locks.ErrInvalidName},
		{"zero TTL", func() error { _, err := New(s.DB(), "x", locks.WithTTL(0)); return err }, locks.ErrInvalidTTL},
		{"negative TTL", func() error { _, err := New(s.DB(), "x", locks.WithTTL(-time.Second)); return err }, locks.ErrInvalidTTL},
		{"bad table", func() error { _, err := New(s.DB(), "x", locks.WithPrefix("t; DROP TABLE x")); return err }, locks.ErrInvalidOption},
		{"CreateTable nil db", func() error { return CreateTable(ctx, nil, "") }, locks.ErrNilClient},
		{"CreateTable bad table", func() error { return CreateTable(ctx, s.DB(), "a-b") }, locks.ErrInvalidOption},
	}
	for _, c := range cases {
		if err := c.make(); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestMissingTable: a lock on a table that does not exist fails with the
// database's error, never as "held" or "locked".
func TestMissingTable(t *testing.T) {
	s := mysqlfake.New(t)
	l := newLocker(t, s.DB(), "x", locks.WithPrefix("no_such_table"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, try := range []func(context.Context) (locks.Lease, error){l.TryLock, l.Lock} {
		lease, err := try(ctx)
		if err == nil || lease != nil || errors.Is(err, locks.ErrLocked) {
			t.Fatalf("lock on a missing table: lease %v, err %v; want a database error", lease, err)
		}
	}
}

// TestFakeKnowsTheRow: a held lock is the row of its name in DefaultTable,
// owned, and mysqlfake.Server.ExpireLock, which finds the row through the
// same layout, ends its lease. A change of the table or its columns on
// either side fails here.
func TestFakeKnowsTheRow(t *testing.T) {
	if mysqlfake.DefaultLockTable != DefaultTable {
		t.Fatalf("mysqlfake.DefaultLockTable = %q, DefaultTable = %q", mysqlfake.DefaultLockTable, DefaultTable)
	}
	s := newServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := newLocker(t, s.DB(), "orders/42")
	if l.Table() != DefaultTable {
		t.Fatalf("Table() = %q, want %q", l.Table(), DefaultTable)
	}
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	var owner string
	if err := s.DB().QueryRowContext(ctx, "SELECT owner FROM `"+DefaultTable+"` WHERE name = ?", "orders/42").Scan(&owner); err != nil {
		t.Fatalf("the lock's row: %v", err)
	}
	if owner == "" {
		t.Fatal("the lock's row has no owner while the lock is held")
	}
	locktest.ExpiredFromOutside(t, lease, func(ctx context.Context) error { return s.ExpireLock(ctx, "orders/42") }, fakes.ErrNoHolder)
}
