package mysqlfake_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/mysqlfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/mysqllock"
)

// mysqlLock starts a server with a lock table and returns a mysqllock on a
// pool of its own.
func mysqlLock(t *testing.T, name string) (*mysqlfake.Server, locks.Locker) {
	t.Helper()
	s := mysqlfake.New(t)
	if err := mysqllock.CreateTable(context.Background(), s.DB(), mysqllock.DefaultTable); err != nil {
		t.Fatal(err)
	}
	db, err := s.OpenDB()
	if err != nil {
		t.Fatal(err)
	}
	l, err := mysqllock.New(db, name)
	if err != nil {
		t.Fatal(err)
	}
	return s, l
}

func mysqlLockNames(t *testing.T) []string {
	_, l := mysqlLock(t, "gated")
	names := faketest.GatedRun(t, l, false)
	faketest.UngatedRun(t, l)
	return names
}

func TestMySQLGateSeesMysqllock(t *testing.T) {
	first := mysqlLockNames(t)
	if !slices.Contains(first, "unlock: mysql UPDATE") {
		t.Errorf("no UPDATE in the unlock among %q", first)
	}
	faketest.SameNames(t, first, mysqlLockNames(t))
}

func TestMySQLGateNames(t *testing.T) {
	s := mysqlfake.New(t)
	db := s.DB()
	g := &faketest.RecordingGate{}
	ctx := locks.WithGate(context.Background(), g)
	if err := db.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "/* a comment */ CREATE TABLE t (id INT PRIMARY KEY, n INT)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES (?, ?)", 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	st, err := db.PrepareContext(ctx, "\n  select n FROM t WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := st.QueryRowContext(ctx, 1).Scan(&n); err != nil || n != 2 {
		t.Fatalf("prepared select: %d, %v", n, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	got := g.Names(t, "statements")
	want := []string{
		"mysql PING", "mysql CREATE TABLE",
		"mysql BEGIN", "mysql INSERT", "mysql COMMIT",
		"mysql BEGIN", "mysql ROLLBACK",
		"mysql PREPARE SELECT", "mysql SELECT",
	}
	if !slices.Equal(got, want) {
		t.Errorf("the gate saw\n%q\nwant\n%q", got, want)
	}
}

func TestMySQLGateHoldsTheRequest(t *testing.T) {
	s, l := mysqlLock(t, "held")
	faketest.HeldLock(t, l, func() error {
		var n int
		if err := s.DB().QueryRowContext(context.Background(),
			"SELECT COUNT(*) FROM "+mysqllock.DefaultTable+" WHERE owner <> ''").Scan(&n); err != nil {
			return err
		}
		if n != 0 {
			return fmt.Errorf("%d row(s) held", n)
		}
		return nil
	})
}
