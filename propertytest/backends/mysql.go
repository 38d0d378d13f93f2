package backends

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/mysqlfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/mysqllock"
	"github.com/lockproof/lockproof/propertytest"
)

// mysqlTimeout bounds the housekeeping statements of the MySQL factories
// (creating and dropping tables, the expiry fault).
const mysqlTimeout = 10 * time.Second

// MySQLLock is the Factory of mysqllock on the in-process MySQL server
// (mysqlfake.Start, go-mysql-server: never a real server) in manual time:
// NOW(6) reads the backend's clock, so leases expire exactly TTL after the
// statement that set them, and the default Options fit. Claims: the
// defaults, FaultCrash and FaultPause (fenced). Its one fault,
// FaultClockJump, marks the holder's row expired now, as a jump of the
// server's clock would; mysqllock does not claim it.
//
// go-mysql-server has one process-wide clock (mysqlfake.Server.FollowClock):
// a second MySQLLock backend at the same time is refused.
func MySQLLock() propertytest.Factory {
	return MySQLLockWith(func(db *sql.DB, name string, opts ...locks.Option) (locks.Locker, error) {
		return mysqllock.New(db, name, opts...)
	})
}

// MySQLLockWith is the Factory of MySQLLock's backend for another lock kept
// in a mysqllock table: newLocker gets a connection pool of its own (a
// client process) on the fake's database, the lock's name and the options
// to pass on, the table first (locks.WithPrefix, a table created by
// mysqllock.CreateTable) and the manual clock, then the suite's.
func MySQLLockWith(newLocker func(db *sql.DB, name string, opts ...locks.Option) (locks.Locker, error)) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		clock := fakes.NewClock(epoch)
		s, err := mysqlfake.Start()
		if err != nil {
			return nil, fmt.Errorf("backends: start the in-process MySQL: %w", err)
		}
		propertytest.CloseAtCleanup(env, "the in-process MySQL", s)
		if err := s.FollowClock(clock); err != nil {
			return nil, fmt.Errorf("backends: %w", err)
		}
		be, err := mysqlBackend(s, mysqllock.DefaultTable, clock, newLocker)
		if err != nil {
			return nil, err
		}
		newLockerOf := be.NewLocker
		var lockName string // the name of the lock the lockers were made for
		be.NewLocker = func(name string, opts ...locks.Option) (locks.Locker, error) {
			lockName = name
			return newLockerOf(name, opts...)
		}
		// Every connection is in memory: the lockers' pools (OpenDB) and the
		// fake's own, which creates the table and injects the fault.
		be.Advance, be.InProcess = clock.Advance, true
		be.Faults = []propertytest.Fault{{
			Name: "the server's clock jumps past the holder's expiry", Kind: propertytest.FaultClockJump,
			Inject: func() error { return expireHolder(s, mysqllock.DefaultTable, lockName) },
		}}
		return be, nil
	}
}

// MySQLLockOn is the Factory of mysqllock on the real MySQL or MariaDB
// server behind dsn, a go-sql-driver/mysql DSN without a database name for
// a user that may create and drop databases, as for mysqlfake.EnvDSN
// ("root@tcp(127.0.0.1:3306)/"). Every run creates a private database and
// drops it afterwards. A real server keeps its own time, so the run does
// too: Clock is the system clock and Advance sleeps. Use a short
// Options.TTL, such as 200ms, and a Slack of at least TTL/4; the lease
// model's clock tolerance (locks.Drift) must cover the difference between
// the server's clock rate and this machine's, as for RedisLockOn. Claims:
// the defaults. No backend fault. It chooses the server with
// mysqlfake.At, not through the environment.
func MySQLLockOn(dsn string) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		if dsn == "" {
			return nil, fmt.Errorf("backends: MySQLLockOn needs the server's DSN")
		}
		s, err := mysqlfake.Start(mysqlfake.At(dsn))
		if err != nil {
			return nil, fmt.Errorf("backends: %w", err)
		}
		propertytest.CloseAtCleanup(env, "the MySQL fake", s)
		be, err := mysqlBackend(s, mysqllock.DefaultTable, locks.SystemClock{},
			func(db *sql.DB, name string, opts ...locks.Option) (locks.Locker, error) {
				return mysqllock.New(db, name, opts...)
			})
		if err != nil {
			return nil, err
		}
		be.Advance = time.Sleep
		return be, nil
	}
}

// mysqlBackend creates the lock table on s and returns a Backend whose
// lockers each have a pool of their own. Advance is left to the caller.
func mysqlBackend(s *mysqlfake.Server, table string, clock locks.Clock,
	newLocker func(db *sql.DB, name string, opts ...locks.Option) (locks.Locker, error)) (*propertytest.Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), mysqlTimeout)
	defer cancel()
	if err := mysqllock.CreateTable(ctx, s.DB(), table); err != nil {
		return nil, fmt.Errorf("backends: %w", err)
	}
	return &propertytest.Backend{
		NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
			db, err := s.OpenDB()
			if err != nil {
				return nil, fmt.Errorf("backends: a client's pool: %w", err)
			}
			own := []locks.Option{locks.WithPrefix(table), locks.WithClock(clock)}
			return newLocker(db, name, append(own, opts...)...)
		},
		Clock: clock,
	}, nil
}

// expireHolder marks the live lease of lock name in table expired now, on
// the server's clock: what a forward jump of that clock does to it. A lock
// nobody holds is left as it is.
func expireHolder(s *mysqlfake.Server, table, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), mysqlTimeout)
	defer cancel()
	err := s.ExpireLockIn(ctx, table, name)
	if err != nil && !errors.Is(err, fakes.ErrNoHolder) {
		return fmt.Errorf("backends: expire the holder's row: %w", err)
	}
	return nil
}
