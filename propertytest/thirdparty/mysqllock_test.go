package thirdparty_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	gomysqllock "github.com/sanketplus/go-mysql-lock"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
)

// mysqlLockTTL is the suite's time scale for go-mysql-lock, whose lock has
// no TTL (see mysqlNamedLock).
const mysqlLockTTL = 10 * time.Second

// mysqlLockOptions are the suite's settings for go-mysql-lock on the
// in-process go-mysql-server: a crashed holder's connection is severed,
// and the server frees its named lock at once, so Slack needs only cover
// the deadlock-freedom probe's steps.
func mysqlLockOptions() propertytest.Options {
	return propertytest.Options{
		TTL:            mysqlLockTTL,
		Slack:          mysqlLockTTL / 2,
		Settle:         30 * time.Millisecond,
		OpTimeout:      100 * time.Millisecond,
		CheckTimeLimit: 3 * time.Second,
		Claims:         []propertytest.FaultKind{propertytest.FaultCrash},
	}
}

// mysqlNamedLock is the Factory of github.com/sanketplus/go-mysql-lock
// (v0.0.7) on the in-process go-mysql-server (fakes.StartMySQL, its named
// locks on the run's manual clock through FollowClock).
//
// Mapping:
//   - One *sql.DB per client, dialed in memory through a fakes.Conns of
//     its own (MySQLServer.OpenDBThrough), one MysqlLocker on it.
//   - Lock is ObtainContext(ctx, name): GET_LOCK(name, -1) on a connection
//     taken from the pool for the lock, waiting in the server. TryLock is
//     ObtainTimeoutContext(ctx, name, 0): GET_LOCK(name, 0), one attempt;
//     ErrMySQLTimeout is locks.ErrLocked.
//   - The lease is the connection. A MySQL named lock has no TTL: it is
//     held until RELEASE_LOCK or until its connection ends, and the
//     library's refresher pings that connection every second of wall time
//     and cancels the lock's context (Grant.Lost) when a ping fails. So the
//     Deadline reported is none of the library's (it has no expiry), and
//     the kit's rule applies: TTL after the call, the suite's TTL being
//     only the time within which the holder acts. The suite's model then
//     lets the lock go to another client TTL after a grant; the server
//     never does while the holder's connection lives, which is safe. What
//     frees a lock whose holder is gone is the end of its connection: the
//     crash severs the client's connections (adapter.WithCrash), as a dead
//     process's are closed, and the server lets the named lock go at once.
//   - Unlock is Lock.Release: DO RELEASE_LOCK(name), then the connection
//     is closed; ErrLockReleased (released before, by the refresher after
//     a failed ping) is locks.ErrNotHeld. No Renew (noRenew), no fencing
//     token.
func mysqlNamedLock() propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		clock := fakes.NewClock(epoch)
		s, err := fakes.StartMySQL(fakes.ForceEmbeddedMySQL())
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the in-process MySQL", s)
		if err := s.FollowClock(clock); err != nil {
			return nil, err
		}
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				o, err := locks.Resolve("", append([]locks.Option{locks.WithClock(clock), locks.WithWatchdog(false)}, opts...)...)
				if err != nil {
					return nil, err
				}
				conns := fakes.NewConns()
				db, err := s.OpenDBThrough(conns)
				if err != nil {
					return nil, err
				}
				env.Cleanup(func() { _ = db.Close() })
				m := gomysqllock.NewMysqlLocker(db)
				lk, err := adapter.New(name, o, adapter.Lock{
					Lock: func(ctx context.Context) (adapter.Grant, error) {
						return mysqlGrant(m.ObtainContext(ctx, name))
					},
					TryLock: func(ctx context.Context) (adapter.Grant, error) {
						return mysqlGrant(m.ObtainTimeoutContext(ctx, name, 0))
					},
				})
				if err != nil {
					return nil, err
				}
				return adapter.WithCrash(lk, conns.Sever), nil
			},
			Clock:     clock,
			Advance:   clock.Advance,
			InProcess: true,
		}, nil
	}
}

// mysqlGrant makes a Grant of what Obtain returned.
func mysqlGrant(l *gomysqllock.Lock, err error) (adapter.Grant, error) {
	switch {
	case errors.Is(err, gomysqllock.ErrMySQLTimeout):
		return adapter.Grant{}, adapter.Locked("go-mysql-lock", err)
	case err != nil:
		return adapter.Grant{}, fmt.Errorf("go-mysql-lock: %w", err)
	}
	return adapter.Grant{Lost: l.GetContext().Done(), Renew: noRenew("go-mysql-lock"), Release: func(context.Context) error {
		err := l.Release()
		if errors.Is(err, gomysqllock.ErrLockReleased) {
			return adapter.NotHeld("go-mysql-lock", err)
		}
		return err
	}}, nil
}

// go-mysql-lock claims mutual exclusion while the holder's connection
// lives, with no fencing token: run with Claims crash only on the fake
// that runs its statements (DO included), the suite should pass. It does
// not yet: a crash severs the holder's connection, MySQL frees the named
// lock at once, and the next grant lands inside the crashed holder's lease
// as the lease model reckons it (TTL after its call), which the model
// calls exclusivity though the crashed holder never acts again. The
// suite's model has no lease that ends with its holder's connection; the
// test is skipped until it has one (set LOCKPROOF_MYSQLLOCK=1 to run it).
func TestThirdPartyMySQLLock(t *testing.T) {
	if os.Getenv("LOCKPROOF_MYSQLLOCK") == "" {
		t.Skip("the lease model holds a crashed holder's lease to its deadline; a MySQL named lock ends with its connection (LOCKPROOF_MYSQLLOCK=1 runs it)")
	}
	propertytest.SetChecks(t, 6)
	rep := ownClaims(t, 0x3e51, mysqlNamedLock(), mysqlLockOptions())
	t.Logf("outcomes %v; spurious refusals %d", rep.Outcomes, rep.SpuriousRefusals)
}
