package mysqllock

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"
)

// statements are the lock's SQL, for one table. Every time is the server's
// NOW(6); the client's clock never reaches the database. Expiries are
// written DATE_ADD(NOW(6), INTERVAL ? MICROSECOND), not NOW(6) + INTERVAL:
// go-mysql-server v0.20 drops the fraction of NOW(6) in the second form,
// which would end a lease up to a second early.
type statements struct {
	// takeOver grants a free (owner '') or expired row, bumping the fence.
	// Args: owner, ttl µs, name.
	takeOver string
	// insert creates the row with the first grant. Args: name, owner, ttl µs.
	insert string
	// read returns owner, fence and the µs left (NULL never: NOT NULL
	// columns; may be ≤ 0 once expired). Args: name.
	read string
	// renew extends an unexpired lease of owner. Args: ttl µs, name, owner.
	renew string
	// holds says whether owner holds an unexpired lease. Args: name, owner.
	holds string
	// release frees the row of owner, keeping it (and its fence). Args:
	// name, owner.
	release string
}

func newStatements(table string) statements {
	t := "`" + table + "`"
	return statements{
		takeOver: "UPDATE " + t + " SET owner = ?, fence = fence + 1, expires_at = DATE_ADD(NOW(6), INTERVAL ? MICROSECOND)" +
			" WHERE name = ? AND (owner = '' OR expires_at <= NOW(6))",
		insert: "INSERT INTO " + t + " (name, owner, fence, expires_at) VALUES (?, ?, 1, DATE_ADD(NOW(6), INTERVAL ? MICROSECOND))",
		read:   "SELECT owner, fence, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) FROM " + t + " WHERE name = ?",
		renew: "UPDATE " + t + " SET expires_at = DATE_ADD(NOW(6), INTERVAL ? MICROSECOND)" +
			" WHERE name = ? AND owner = ? AND expires_at > NOW(6)",
		holds:   "SELECT expires_at > NOW(6) FROM " + t + " WHERE name = ? AND owner = ?",
		release: "UPDATE " + t + " SET owner = '', expires_at = NOW(6) WHERE name = ? AND owner = ?",
	}
}

// ErrTransient marks a database failure that may pass: a deadlock (MySQL
// error 1213), a lock wait timeout (1205), or a lost or broken connection.
// The statements that meet 1213 or 1205 are retried a few times first. The
// driver's error stays in the chain, so errors.As with *mysql.MySQLError
// still works.
var ErrTransient = errors.New("mysqllock: transient database error")

const (
	errDuplicate       = 1062
	errLockWaitTimeout = 1205
	errDeadlock        = 1213
)

// classify wraps err with ErrTransient when it is one.
func classify(err error) error {
	if err == nil || !transient(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrTransient, err)
}

func transient(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == errDeadlock || me.Number == errLockWaitTimeout
	}
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne)
}

// retryable: a deadlock or lock wait timeout, after which the statement had
// no effect (MySQL rolls the statement or the transaction back).
func retryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == errDeadlock || me.Number == errLockWaitTimeout)
}

func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDuplicate
}

// retries is how often a statement that met a deadlock or lock wait timeout
// is tried again, after a short jittered pause.
const retries = 3

// retry runs f until it succeeds, fails otherwise than by a deadlock or lock
// wait timeout, runs out of tries, or ctx ends. The error is classified.
func (l *Locker) retry(ctx context.Context, f func() error) error {
	var err error
	for i := 0; ; i++ {
		err = f()
		if err == nil || !retryable(err) || i == retries || ctx.Err() != nil {
			return classify(err)
		}
		pause := time.Millisecond + l.opt.Jitter(time.Duration(5<<i)*time.Millisecond)
		t := l.opt.Clock.NewTimer(pause)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return classify(err)
		}
	}
}

// exec runs one statement with retry and returns the rows it changed.
func (l *Locker) exec(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := l.retry(ctx, func() error {
		res, err := l.db.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
