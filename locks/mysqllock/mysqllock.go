package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/locks"
)

// DefaultTable is the lock table used unless locks.WithPrefix names another.
const DefaultTable = layout.MySQLDefaultTable

// newOwner makes the owner of one acquisition; tests replace it to know
// the owner in advance.
var newOwner = locks.NewOwner

// tableName is what a table name may look like: it is written into the
// statements, so it is checked rather than quoted.
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// CreateTable creates the lock table if it does not exist (see the package
// documentation for its DDL). table "" means DefaultTable.
func CreateTable(ctx context.Context, db *sql.DB, table string) error {
	if db == nil {
		return fmt.Errorf("mysqllock: %w", locks.ErrNilClient)
	}
	if table == "" {
		table = DefaultTable
	}
	if !tableName.MatchString(table) {
		return fmt.Errorf("mysqllock: %w: table name %q (letters, digits and _, at most 64)", locks.ErrInvalidOption, table)
	}
	if _, err := db.ExecContext(ctx, layout.MySQLTable(table)); err != nil {
		return fmt.Errorf("mysqllock: create table %s: %w", table, classify(err))
	}
	return nil
}

// Locker is one named lock, a row of a lock table. It is safe for concurrent
// use; each Lock or TryLock gets its own owner and its own lease.
type Locker struct {
	db      *sql.DB
	name    string
	opt     locks.Options
	reentry *locks.Reentry // nil without locks.WithOwner
	q       statements
}

var _ locks.Locker = (*Locker)(nil)

// New returns the lock called name, kept in the lock table of db. The table
// must exist (CreateTable). Options: locks.WithTTL (at least 1 ms: the
// database keeps microseconds), WithWatchdog, WithWaitBudget,
// WithRequestTimeout, WithPrefix (the table's name, default DefaultTable),
// WithClock, WithLogger, WithObserver, WithMaxHold,
// WithOwner (re-entry by the same owner through this Locker; another Locker
// with the same owner id contends as any other owner: see locks.WithOwner).
func New(db *sql.DB, name string, opts ...locks.Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("mysqllock: %w", locks.ErrNilClient)
	}
	if err := locks.ValidateName(name); err != nil {
		return nil, fmt.Errorf("mysqllock: %w", err)
	}
	o, err := locks.Resolve(DefaultTable, opts...)
	if err != nil {
		return nil, fmt.Errorf("mysqllock: %w", err)
	}
	if !tableName.MatchString(o.Prefix) {
		return nil, fmt.Errorf("mysqllock: %w: table name %q (letters, digits and _, at most 64)", locks.ErrInvalidOption, o.Prefix)
	}
	return &Locker{db: db, name: name, opt: o, reentry: locks.NewReentry(o), q: newStatements(o.Prefix)}, nil
}

// Name returns the lock's name.
func (l *Locker) Name() string { return l.name }

// Table returns the lock table's name.
func (l *Locker) Table() string { return l.opt.Prefix }

// TryLock makes one attempt; it returns locks.ErrLocked when the lock is held.
func (l *Locker) TryLock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, true, l.tryLock)
}

// tryLock is TryLock without re-entry (see locks.WithOwner).
func (l *Locker) tryLock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, l.errorf("try lock: %w", err)
	}
	owner := newOwner()
	r, err := l.attempt(ctx, owner)
	if err != nil {
		return nil, err
	}
	if !r.won {
		return nil, l.errorf("%w", locks.ErrLocked)
	}
	return l.grant(ctx, owner, r)
}

// attemptResult is what one acquisition attempt found.
type attemptResult struct {
	won   bool
	fence locks.Token
	start time.Time     // when the attempt was sent
	left  time.Duration // the holder's remaining time when !won; < 0 unknown
}

// attempt takes the lock for owner if its row is free or expired, creating
// the row on first use. The outcome is then read back by owner, in the same
// way after an error whose outcome is unknown (a lost connection): owners
// are unique, so the row says whether this attempt won.
func (l *Locker) attempt(ctx context.Context, owner string) (attemptResult, error) {
	r := attemptResult{start: l.opt.Clock.Now(), left: -1}
	ttl := l.opt.TTL.Microseconds()
	n, err := l.exec(ctx, l.q.takeOver, owner, ttl, l.name)
	if err == nil && n == 0 {
		// Held, or no row yet: a row is created by the first grant only.
		_, err = l.exec(ctx, l.q.insert, l.name, owner, ttl)
		if isDuplicate(err) {
			err = nil
		}
	}
	if err != nil && ctx.Err() == nil && errors.Is(err, ErrTransient) {
		// The statement may have taken effect: look.
		return l.readBack(ctx, owner, r, err)
	}
	if err != nil {
		return r, err
	}
	return l.readBack(ctx, owner, r, nil)
}

// readBack reads the lock's row: its fence when owner holds it, else the
// holder's remaining time. cause is the error of the attempt, if any: when
// the row shows owner did not win, the attempt failed with cause.
func (l *Locker) readBack(ctx context.Context, owner string, r attemptResult, cause error) (attemptResult, error) {
	var holder string
	var fence uint64
	var left sql.NullInt64
	err := l.retry(ctx, func() error {
		return l.db.QueryRowContext(ctx, l.q.read, l.name).Scan(&holder, &fence, &left)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows) && cause == nil:
		return r, l.errorf("acquire: the lock's row vanished (was the table changed by hand?)")
	case err != nil && cause != nil:
		l.forget(owner)
		return r, l.errorf("acquire: %w (outcome unknown: %v; released if it was taken)", cause, err)
	case err != nil:
		l.forget(owner)
		return r, l.errorf("acquire: read back: %w", err)
	}
	if holder == owner {
		r.won, r.fence = true, locks.Token(fence)
		return r, nil
	}
	if cause != nil {
		return r, l.errorf("acquire: %w", cause)
	}
	if holder != "" && left.Valid && left.Int64 > 0 {
		r.left = time.Duration(left.Int64) * time.Microsecond
	} else {
		r.left = 0 // free or expired again: worth another try at once
	}
	return r, nil
}

// forget releases owner's row, if it was taken by an attempt whose outcome
// could not be read, so that the lock does not wait out a whole TTL.
func (l *Locker) forget(owner string) {
	ctx, cancel := locks.RequestContext(context.Background(), l.opt.RequestTimeout)
	defer cancel()
	if _, err := l.exec(ctx, l.q.release, l.name, owner); err != nil {
		l.opt.Logger.Warn("lockproof: could not release an acquisition of unknown outcome; it expires by TTL",
			"lock", l.name, "err", err)
	}
}

// grant wraps an acquisition in a managed lease and reports it to the
// observer. An acquisition whose validity had already run out by the time
// the answer arrived is released and reported as locks.ErrLeaseExpired.
func (l *Locker) grant(ctx context.Context, owner string, r attemptResult) (locks.Lease, error) {
	lease := locks.NewLease(locks.LeaseSpec{Name: l.name, Token: r.fence, Fenced: true, Start: r.start},
		leaseOps{l: l, owner: owner}, l.opt)
	if err := lease.GiveBackIfLate(ctx); err != nil {
		return nil, l.errorf("acquired too late: %w", err)
	}
	locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: l.name, Token: r.fence, Fenced: true})
	return lease, nil
}

func (l *Locker) errorf(format string, args ...any) error {
	return fmt.Errorf("mysqllock %q: "+format, append([]any{l.name}, args...)...)
}

// leaseOps are the owner-checked operations on one acquisition.
type leaseOps struct {
	l     *Locker
	owner string
}

func (o leaseOps) Renew(ctx context.Context) error {
	l := o.l
	n, err := l.exec(ctx, l.q.renew, l.opt.TTL.Microseconds(), l.name, o.owner)
	if err != nil {
		return fmt.Errorf("mysqllock: renew: %w", err)
	}
	if n == 1 {
		return nil
	}
	// MySQL counts changed rows, not matched ones: an update that set the
	// same expiry (within one microsecond) reports 0. Ask.
	var held bool
	err = l.retry(ctx, func() error {
		return l.db.QueryRowContext(ctx, l.q.holds, l.name, o.owner).Scan(&held)
	})
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !held) {
		return fmt.Errorf("mysqllock: %w", locks.ErrNotHeld)
	}
	if err != nil {
		return fmt.Errorf("mysqllock: renew: %w", err)
	}
	return nil
}

func (o leaseOps) Release(ctx context.Context) error {
	n, err := o.l.exec(ctx, o.l.q.release, o.l.name, o.owner)
	if err != nil {
		return fmt.Errorf("mysqllock: release: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("mysqllock: %w", locks.ErrNotHeld)
	}
	return nil
}
