package mysqllock

import (
	"context"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/go-sql-driver/mysql"

	"github.com/lockproof/lockproof/locks"
)

// The exact statements of each operation, and a failure injected at each
// step: every failure is a typed error and never a lease that is not held.

const (
	mockOwner = "0123456789abcdef0123456789abcdef"
	mockName  = "orders"
	mockTTL   = 10 * time.Second
)

var (
	q       = newStatements(DefaultTable)
	ttlArg  = mockTTL.Microseconds()
	readCol = []string{"owner", "fence", "left"}
)

// mockLocker returns a Locker on a go-sqlmock database that matches
// statements exactly, with every new owner being mockOwner.
func mockLocker(t *testing.T) (*Locker, sqlmock.Sqlmock) {
	t.Helper()
	db, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mock.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
		_ = db.Close()
	})
	prev := newOwner
	newOwner = func() string { return mockOwner }
	t.Cleanup(func() { newOwner = prev })
	l, err := New(db, mockName, locks.WithTTL(mockTTL), locks.WithWatchdog(false), locks.WithRequestTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return l, mock
}

func deadlock() error { return &mysql.MySQLError{Number: errDeadlock, Message: "Deadlock found"} }
func waitTimeout() error {
	return &mysql.MySQLError{Number: errLockWaitTimeout, Message: "Lock wait timeout"}
}

// notHeld checks that an attempt failed without a lease.
func notHeld(t *testing.T, lease locks.Lease, err error) {
	t.Helper()
	if lease != nil || err == nil {
		t.Fatalf("lease %v, err %v: want no lease and an error", lease, err)
	}
}

func TestSQLTakeOverAndRelease(t *testing.T) {
	l, mock := mockLocker(t)
	mock.ExpectExec(q.takeOver).WithArgs(mockOwner, ttlArg, mockName).WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectQuery(q.read).WithArgs(mockName).WillReturnRows(sqlmock.NewRows(readCol).AddRow(mockOwner, 7, 9_990_000))
	mock.ExpectExec(q.renew).WithArgs(ttlArg, mockName, mockOwner).WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectExec(q.release).WithArgs(mockName, mockOwner).WillReturnResult(sqlmock.NewResult(0, 1))
	ctx := context.Background()
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tok, ok := lease.Token(); !ok || tok != 7 {
		t.Fatalf("token %v (fenced %v), want 7", tok, ok)
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestSQLFirstGrantInserts(t *testing.T) {
	l, mock := mockLocker(t)
	mock.ExpectExec(q.takeOver).WithArgs(mockOwner, ttlArg, mockName).WillReturnResult(sqlmock.NewResult(0, 0))
	mock.ExpectExec(q.insert).WithArgs(mockName, mockOwner, ttlArg).WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectQuery(q.read).WithArgs(mockName).WillReturnRows(sqlmock.NewRows(readCol).AddRow(mockOwner, 1, 10_000_000))
	lease, err := l.TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := lease.Token(); tok != 1 {
		t.Fatalf("token %v, want 1", tok)
	}
}

func TestSQLHeldByAnother(t *testing.T) {
	l, mock := mockLocker(t)
	mock.ExpectExec(q.takeOver).WithArgs(mockOwner, ttlArg, mockName).WillReturnResult(sqlmock.NewResult(0, 0))
	mock.ExpectExec(q.insert).WithArgs(mockName, mockOwner, ttlArg).
		WillReturnError(&mysql.MySQLError{Number: errDuplicate, Message: "Duplicate entry"})
	mock.ExpectQuery(q.read).WithArgs(mockName).WillReturnRows(sqlmock.NewRows(readCol).AddRow("someone-else", 3, 5_000_000))
	lease, err := l.TryLock(context.Background())
	notHeld(t, lease, err)
	if !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock on a held lock: %v, want ErrLocked", err)
	}
}

func TestSQLInsertError(t *testing.T) {
	l, mock := mockLocker(t)
	mock.ExpectExec(q.takeOver).WithArgs(mockOwner, ttlArg, mockName).WillReturnResult(sqlmock.NewResult(0, 0))
	mock.ExpectExec(q.insert).WithArgs(mockName, mockOwner, ttlArg).
		WillReturnError(&mysql.MySQLError{Number: 1146, Message: "Table 'x.lockproof_locks' doesn't exist"})
	lease, err := l.TryLock(context.Background())
	notHeld(t, lease, err)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1146 || errors.Is(err, locks.ErrLocked) || errors.Is(err, ErrTransient) {
		t.Fatalf("insert error: %v; want the driver's 1146, neither locked nor transient", err)
	}
}

// A connection lost after the statement was sent: it may have taken effect.
// The row, read by owner, decides.
func TestSQLLostConnectionThenWon(t *testing.T) {
	l, mock := mockLocker(t)
	mock.ExpectExec(q.takeOver).WithArgs(mockOwner, ttlArg, mockName).WillReturnError(mysql.ErrInvalidConn)
	mock.ExpectQuery(q.read).WithArgs(mockName).WillReturnRows(sqlmock.NewRows(readCol).AddRow(mockOwner, 12, 9_000_000))
	lease, err := l.TryLock(context.Background())
	if err != nil {
		t.Fatalf("the row shows the lost statement won: %v", err)
	}
	if tok, _ := lease.Token(); tok != 12 {
		t.Fatalf("token %v, want 12", tok)
	}
}

func TestSQLLostConnectionThenLost(t *testing.T) {
	l, mock := mockLocker(t)
	mock.ExpectExec(q.takeOver).WithArgs(mockOwner, ttlArg, mockName).WillReturnError(mysql.ErrInvalidConn)
	mock.ExpectQuery(q.read).WithArgs(mockName).WillReturnRows(sqlmock.NewRows(readCol).AddRow("someone-else", 12, 9_000_000))
	lease, err := l.TryLock(context.Background())
	notHeld(t, lease, err)
	if !errors.Is(err, ErrTransient) || !errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, locks.ErrLocked) {
		t.Fatalf("lost connection, another holder: %v; want ErrTransient wrapping the driver's error", err)
	}
}

// The statement's outcome cannot be read either: the attempt is released,
// owner-checked, in case it won, and reported as an error.
func TestSQLLostConnectionUnknownOutcome(t *testing.T) {
	l, mock := mockLocker(t)
	mock.ExpectExec(q.takeOver).WithArgs(mockOwner, ttlArg, mockName).WillReturnError(mysql.ErrInvalidConn)
	mock.ExpectQuery(q.read).WithArgs(mockName).WillReturnError(mysql.ErrInvalidConn)
	mock.ExpectExec(q.release).WithArgs(mockName, mockOwner).WillReturnResult(sqlmock.NewResult(0, 1))
	lease, err := l.TryLock(context.Background())
	notHeld(t, lease, err)
	if !errors.Is(err, ErrTransient) {
		t.Fatalf("unknown outcome: %v, want ErrTransient", err)
	}
}

func TestSQLDeadlockRetried(t *testing.T) {
	l, mock := mockLocker(t)
	mock.ExpectExec(q.takeOver).WithArgs(mockOwner, ttlArg, mockName).WillReturnError(deadlock())
	mock.ExpectExec(q.takeOver).WithArgs(mockOwner, ttlArg, mockName).WillReturnError(waitTimeout())
	mock.ExpectExec(q.takeOver).WithArgs(mockOwner, ttlArg, mockName).WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectQuery(q.read).WithArgs(mockName).WillReturnRows(sqlmock.NewRows(readCol).AddRow(mockOwner, 4, 9_000_000))
	if _, err := l.TryLock(context.Background()); err != nil {
		t.Fatalf("after a deadlock and a lock wait timeout, then success: %v", err)
	}
}

func TestSQLDeadlockPersists(t *testing.T) {
	l, mock := mockLocker(t)
	for range retries + 1 {
		mock.ExpectExec(q.takeOver).WithArgs(mockOwner, ttlArg, mockName).WillReturnError(deadlock())
	}
	// The attempt had no effect (a deadlock rolls the statement back), but
	// the row is read to be sure.
	mock.ExpectQuery(q.read).WithArgs(mockName).WillReturnRows(sqlmock.NewRows(readCol).AddRow("", 4, 0))
	lease, err := l.TryLock(context.Background())
	notHeld(t, lease, err)
	var me *mysql.MySQLError
	if !errors.Is(err, ErrTransient) || !errors.As(err, &me) || me.Number != errDeadlock {
		t.Fatalf("persistent deadlock: %v; want ErrTransient wrapping error 1213", err)
	}
}

func TestSQLRenewZeroRows(t *testing.T) {
	for _, c := range []struct {
		name string
		rows *sqlmock.Rows
		want error
	}{
		{"unchanged but held", sqlmock.NewRows([]string{"held"}).AddRow(true), nil},
		{"expired", sqlmock.NewRows([]string{"held"}).AddRow(false), locks.ErrNotHeld},
		{"taken over", sqlmock.NewRows([]string{"held"}), locks.ErrNotHeld},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, mock := mockLocker(t)
			mock.ExpectExec(q.renew).WithArgs(ttlArg, mockName, mockOwner).WillReturnResult(sqlmock.NewResult(0, 0))
			mock.ExpectQuery(q.holds).WithArgs(mockName, mockOwner).WillReturnRows(c.rows)
			err := leaseOps{l: l, owner: mockOwner}.Renew(context.Background())
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("Renew: %v, want %v", err, c.want)
			}
		})
	}
}

func TestSQLRenewError(t *testing.T) {
	l, mock := mockLocker(t)
	mock.ExpectExec(q.renew).WithArgs(ttlArg, mockName, mockOwner).WillReturnError(mysql.ErrInvalidConn)
	err := leaseOps{l: l, owner: mockOwner}.Renew(context.Background())
	if !errors.Is(err, ErrTransient) || errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Renew on a lost connection: %v; want ErrTransient, not ErrNotHeld", err)
	}
}

func TestSQLReleaseZeroRows(t *testing.T) {
	l, mock := mockLocker(t)
	mock.ExpectExec(q.release).WithArgs(mockName, mockOwner).WillReturnResult(sqlmock.NewResult(0, 0))
	if err := (leaseOps{l: l, owner: mockOwner}).Release(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Release of a row that is not ours: %v, want ErrNotHeld", err)
	}
}

func TestSQLReleaseRetriedAfterLockWaitTimeout(t *testing.T) {
	l, mock := mockLocker(t)
	mock.ExpectExec(q.release).WithArgs(mockName, mockOwner).WillReturnError(waitTimeout())
	mock.ExpectExec(q.release).WithArgs(mockName, mockOwner).WillReturnResult(sqlmock.NewResult(0, 1))
	if err := (leaseOps{l: l, owner: mockOwner}).Release(context.Background()); err != nil {
		t.Fatalf("Release after a lock wait timeout: %v", err)
	}
}

// TestSQLTransientClassification: which driver errors count as transient.
func TestSQLTransientClassification(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{deadlock(), true},
		{waitTimeout(), true},
		{mysql.ErrInvalidConn, true},
		{driver.ErrBadConn, true},
		{&mysql.MySQLError{Number: errDuplicate}, false},
		{&mysql.MySQLError{Number: 1146}, false},
		{context.Canceled, false},
		{errors.New("syntax"), false},
	} {
		if got := errors.Is(classify(c.err), ErrTransient); got != c.want {
			t.Errorf("classify(%v) transient = %v, want %v", c.err, got, c.want)
		}
	}
}
