package mysqlfake

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
)

func mustOpen(t *testing.T, s *Server) *sql.DB {
	t.Helper()
	db, err := s.OpenDB()
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) int64 {
	t.Helper()
	res, err := db.ExecContext(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMySQLConcurrentWriters: increments from many connections at once are
// all kept (go-mysql-server's memory engine alone loses some).
func TestMySQLConcurrentWriters(t *testing.T) {
	s := New(t)
	mustExec(t, s.DB(), "CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)")
	mustExec(t, s.DB(), "INSERT INTO counter VALUES (1, 0)")
	const pools, each = 8, 25
	var wg sync.WaitGroup
	for range pools {
		db := mustOpen(t, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := db.ExecContext(context.Background(), "UPDATE counter SET n = n + 1 WHERE id = 1"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var n int
	if err := s.DB().QueryRowContext(context.Background(), "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != pools*each {
		t.Fatalf("counter = %d after %d increments", n, pools*each)
	}
}

// TestMySQLFailedStatementKeepsNoStaleCopy: after a statement fails on one
// connection, that connection's next write must not bring back what it read
// before (the memory engine keeps the failed statement's copy of the table
// unless the session is rolled back).
func TestMySQLFailedStatementKeepsNoStaleCopy(t *testing.T) {
	s := New(t)
	a, b := mustOpen(t, s), mustOpen(t, s)
	a.SetMaxOpenConns(1)
	b.SetMaxOpenConns(1)
	mustExec(t, a, "CREATE TABLE kv (k VARCHAR(10) PRIMARY KEY, v VARCHAR(10) NOT NULL)")
	mustExec(t, a, "INSERT INTO kv VALUES ('x', 'a')")
	if _, err := b.ExecContext(context.Background(), "INSERT INTO kv VALUES ('x', 'b')"); err == nil {
		t.Fatal("duplicate insert succeeded")
	}
	mustExec(t, a, "UPDATE kv SET v = 'a2' WHERE k = 'x'")
	if n := mustExec(t, b, "UPDATE kv SET v = 'never' WHERE k = 'x' AND v = 'a'"); n != 0 {
		t.Fatalf("b's update matched %d rows of a stale copy", n)
	}
	var v string
	if err := b.QueryRowContext(context.Background(), "SELECT v FROM kv WHERE k = 'x'").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != "a2" {
		t.Fatalf("v = %q after a's update, want a2", v)
	}
}

// TestMySQLExpireLock: the control expires a live lease on the server's
// clock, and says so when there is none.
func TestMySQLExpireLock(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	mustExec(t, s.DB(), "CREATE TABLE locks_t (name VARBINARY(256) NOT NULL PRIMARY KEY, owner VARCHAR(64) NOT NULL DEFAULT '',"+
		" fence BIGINT UNSIGNED NOT NULL, expires_at DATETIME(6) NOT NULL)")
	mustExec(t, s.DB(), "INSERT INTO locks_t VALUES ('held', 'me', 1, DATE_ADD(NOW(6), INTERVAL 1 HOUR)), ('free', '', 1, NOW(6))")
	if err := s.ExpireLockIn(ctx, "locks_t", "held"); err != nil {
		t.Fatal(err)
	}
	var expired bool
	if err := s.DB().QueryRowContext(ctx, "SELECT expires_at <= NOW(6) FROM locks_t WHERE name = 'held'").Scan(&expired); err != nil {
		t.Fatal(err)
	}
	if !expired {
		t.Fatal("the lease did not expire")
	}
	for _, c := range []struct{ table, name string }{{"locks_t", "held"}, {"locks_t", "free"}, {"locks_t", "none"}, {"x;y", "held"}, {"", "held"}} {
		if err := s.ExpireLockIn(ctx, c.table, c.name); err == nil {
			t.Errorf("ExpireLockIn(%q, %q) succeeded; want an error", c.table, c.name)
		}
	}
}

// TestStartMySQL: the in-process server starts well under a second, serves,
// and closes everything it opened, twice without harm.
func TestStartMySQL(t *testing.T) {
	began := time.Now()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start: ready in %v", time.Since(began))
	if _, err := s.OpenDB(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.OpenDB(); err == nil {
		t.Fatal("OpenDB after Close succeeded")
	}
}

// BenchmarkStartMySQL: start-up to a ready pool, and shutdown.
func BenchmarkStartMySQL(b *testing.B) {
	for range b.N {
		s, err := Start()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMySQLFollowClock: the in-process server's NOW(6) reads the clock it
// follows, and moves when that clock is advanced; a second server cannot
// follow a clock until the first is closed, and then its NOW(6) is its own
// clock's again.
func TestMySQLFollowClock(t *testing.T) {
	ctx := context.Background()
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func(s *Server) time.Time {
		t.Helper()
		var at time.Time
		if err := s.DB().QueryRowContext(ctx, "SELECT NOW(6)").Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	first, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	clock := fakes.NewClock(epoch)
	if err := first.FollowClock(clock); err != nil {
		t.Fatalf("FollowClock: %v", err)
	}
	if got := now(first); !got.Equal(epoch) {
		t.Fatalf("NOW(6) = %v, want the clock's %v", got, epoch)
	}
	clock.Advance(1500 * time.Millisecond)
	if got := now(first); !got.Equal(epoch.Add(1500 * time.Millisecond)) {
		t.Fatalf("NOW(6) after Advance = %v, want %v", got, epoch.Add(1500*time.Millisecond))
	}

	second, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := second.FollowClock(fakes.NewClock(epoch)); !errors.Is(err, ErrClockTaken) {
		t.Fatalf("a second FollowClock = %v, want ErrClockTaken", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	later := epoch.Add(time.Hour)
	if err := second.FollowClock(fakes.NewClock(later)); err != nil {
		t.Fatalf("FollowClock after the first server's Close: %v", err)
	}
	if got := now(second); !got.Equal(later) {
		t.Fatalf("NOW(6) = %v, want the second clock's %v", got, later)
	}
}

// The in-process server's own pools reach it in memory, and its DSN still
// reaches it over TCP, for clients built elsewhere; once closed, it
// refuses in-memory dials as a closed port.
func TestMySQLInMemoryAndTCP(t *testing.T) {
	s, err := Start(ForceEmbedded())
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, s.DB(), "CREATE TABLE seen (id INT PRIMARY KEY)")
	mustExec(t, s.DB(), "INSERT INTO seen VALUES (7)")
	tcp, err := sql.Open("mysql", s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	var id int
	if err := tcp.QueryRowContext(context.Background(), "SELECT id FROM seen").Scan(&id); err != nil || id != 7 {
		t.Fatalf("over TCP: id %d, %v", id, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.mem.Dial(context.Background(), "tcp", ""); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("an in-memory dial after Close: %v, want ECONNREFUSED", err)
	}
}
