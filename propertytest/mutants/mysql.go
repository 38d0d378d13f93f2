package mutants

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/mysqllock"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
)

func init() {
	register(Mutant{
		Name: "mysql-takeover-without-expiry-check",
		Bug: "a MySQL lock whose takeover UPDATE matches the lock's row by name alone, " +
			"without mysqllock's AND (owner = '' OR expires_at <= NOW(6)): it takes over a live holder's row",
		Breaks: propertytest.Exclusivity,
		// The suite probes the holder after a stale lease's Unlock or Renew
		// with another client's acquire, and this takeover grants it over
		// the live holder: the loss is then blamed on the stale call
		// (-rapid.seed=3574099503586610001 under LOCKPROOF_DEEP named
		// symmetry).
		AlsoBreaks: []propertytest.Property{propertytest.Symmetry},
		Factory:    backends.MySQLLockWith(newBlindTakeover),
		Fixed:      backends.MySQLLock(),
		Options:    propertytest.Options{}, // backends.MySQLLock's: the defaults
	})
}

// blindTakeover is mysqllock's row (owner, fence, expires_at on the
// server's clock) with a takeover that ignores the holder.
type blindTakeover struct {
	db   *sql.DB
	name string
	opt  locks.Options
	t    string // the table, quoted
}

func newBlindTakeover(db *sql.DB, name string, opts ...locks.Option) (locks.Locker, error) {
	o, err := locks.Resolve(mysqllock.DefaultTable, opts...)
	if err != nil {
		return nil, err
	}
	return &blindTakeover{db: db, name: name, opt: o, t: "`" + o.Prefix + "`"}, nil
}

// TryLock takes the row over (THE BUG: whoever holds it, expired or not),
// creating it on first use, and reads the fence back.
func (l *blindTakeover) TryLock(ctx context.Context) (locks.Lease, error) {
	owner, start, ttl := locks.NewOwner(), l.opt.Clock.Now(), l.opt.TTL.Microseconds()
	res, err := l.db.ExecContext(ctx, "UPDATE "+l.t+" SET owner = ?, fence = fence + 1,"+
		" expires_at = DATE_ADD(NOW(6), INTERVAL ? MICROSECOND) WHERE name = ?", owner, ttl, l.name)
	if err != nil {
		return nil, fmt.Errorf("mutant: take over: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		_, err = l.db.ExecContext(ctx, "INSERT INTO "+l.t+" (name, owner, fence, expires_at)"+
			" VALUES (?, ?, 1, DATE_ADD(NOW(6), INTERVAL ? MICROSECOND))", l.name, owner, ttl)
		if err != nil {
			return nil, fmt.Errorf("mutant: insert: %w", err)
		}
	}
	var fence uint64
	if err := l.db.QueryRowContext(ctx, "SELECT fence FROM "+l.t+" WHERE name = ? AND owner = ?", l.name, owner).Scan(&fence); err != nil {
		return nil, fmt.Errorf("mutant: read back: %w", err)
	}
	ops := &blindTakeoverOps{l: l, owner: owner}
	return locks.NewLease(locks.LeaseSpec{Name: l.name, Token: locks.Token(fence), Fenced: true, Start: start}, ops, l.opt), nil
}

// Lock never waits: TryLock always wins.
func (l *blindTakeover) Lock(ctx context.Context) (locks.Lease, error) {
	return retryEvery(ctx, l.opt, l.TryLock)
}

// blindTakeoverOps are mysqllock's owner-checked renewal and release.
type blindTakeoverOps struct {
	l     *blindTakeover
	owner string
}

func (o *blindTakeoverOps) Renew(ctx context.Context) error {
	l := o.l
	if _, err := l.db.ExecContext(ctx, "UPDATE "+l.t+" SET expires_at = DATE_ADD(NOW(6), INTERVAL ? MICROSECOND)"+
		" WHERE name = ? AND owner = ? AND expires_at > NOW(6)", l.opt.TTL.Microseconds(), l.name, o.owner); err != nil {
		return fmt.Errorf("mutant: renew: %w", err)
	}
	// Rows changed may be 0 for an unchanged expiry: ask.
	var held bool
	err := l.db.QueryRowContext(ctx, "SELECT expires_at > NOW(6) FROM "+l.t+" WHERE name = ? AND owner = ?",
		l.name, o.owner).Scan(&held)
	switch {
	case errors.Is(err, sql.ErrNoRows) || (err == nil && !held):
		return fmt.Errorf("mutant: %w", locks.ErrNotHeld)
	case err != nil:
		return fmt.Errorf("mutant: renew: %w", err)
	}
	return nil
}

func (o *blindTakeoverOps) Release(ctx context.Context) error {
	res, err := o.l.db.ExecContext(ctx, "UPDATE "+o.l.t+" SET owner = '', expires_at = NOW(6) WHERE name = ? AND owner = ?",
		o.l.name, o.owner)
	if err != nil {
		return fmt.Errorf("mutant: release: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("mutant: %w", locks.ErrNotHeld)
	}
	return nil
}
