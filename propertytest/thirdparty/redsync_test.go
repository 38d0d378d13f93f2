package thirdparty_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// redsyncRetry is the delay between redsync's attempts in Lock (wall
// time; its default is 50-250 ms at random): short enough that a waiter
// sees a freed lock within the suite's Settle.
const redsyncRetry = 10 * time.Millisecond

// redsyncLock is the Factory of go-redsync/redsync's Mutex with one pool
// (go-redis v9) per client on one miniredis in manual time, reached in
// memory (Backend.InProcess).
//
// Mapping:
//   - One redsync.Mutex per acquisition (NewMutex is how redsync hands out
//     a lock; a Mutex keeps its value and validity, so it is not shared),
//     on the key Prefix + name, WithExpiry(TTL). The drift factor is
//     redsync's default (1%).
//   - TryLock is TryLockContext, one attempt; ErrTaken (the key is
//     another value's) is locks.ErrLocked. Lock is LockContext with
//     unlimited tries (redsync's default gives up after 32), so that it
//     waits until ctx ends as locks.Locker.Lock does, and redsyncRetry
//     between them. redsync reports a cancelled wait as ErrFailed: the
//     kit adds ctx.Err() to it, as the Locker contract asks.
//   - Start: redsync computes Until from the start of the successful
//     attempt on the wall clock; the run's clock is the manual one. The
//     kit reads the manual clock as each SET is let go (Lock.Grants), and
//     the last one, which granted, is the start. Deadline is then start +
//     TTL - 1% - 2 ms, 2 ms more conservative than redsync's Until.
//   - No fencing token: redsync has none. The lease's Token reports none
//     (ok false), as lockproof's Redlock does: the suite numbers grants
//     itself and holders write unguarded.
//   - Renew is ExtendContext; Unlock is UnlockContext. ErrTaken (another
//     value holds the key) and ErrLockAlreadyExpired (no key) are
//     locks.ErrNotHeld. ErrExtendFailed (extended, but too late to be
//     valid by redsync's clock) passes through: unknown.
func redsyncLock() propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		r, err := redisfake.Start(redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the Redis fake", r)
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				o, err := locks.Resolve(r.Prefix(), append(r.LockOptions(), opts...)...)
				if err != nil {
					return nil, err
				}
				rs := redsync.New(goredis.NewPool(r.NewClient()))
				return adapter.New(name, o, redsyncAdapter(rs, o.Prefix+name, o))
			},
			Clock:     r.Clock(),
			Advance:   r.Advance,
			InProcess: true,
		}, nil
	}
}

// redsyncAdapter describes redsync's Mutex on key to the kit.
func redsyncAdapter(rs *redsync.Redsync, key string, o locks.Options) adapter.Lock {
	acquire := func(wait bool) func(context.Context) (adapter.Grant, error) {
		return func(ctx context.Context) (adapter.Grant, error) {
			m := rs.NewMutex(key, redsync.WithExpiry(o.TTL), redsync.WithTries(math.MaxInt32),
				redsync.WithRetryDelay(redsyncRetry))
			var err error
			if wait {
				err = m.LockContext(ctx)
			} else {
				err = m.TryLockContext(ctx)
			}
			var taken *redsync.ErrTaken
			switch {
			case errors.As(err, &taken):
				return adapter.Grant{}, adapter.Locked("redsync", err)
			case err != nil:
				return adapter.Grant{}, err
			}
			return adapter.Grant{
				Renew: func(ctx context.Context) error {
					_, err := m.ExtendContext(ctx)
					return redsyncNotHeld(err)
				},
				Release: func(ctx context.Context) error {
					_, err := m.UnlockContext(ctx)
					return redsyncNotHeld(err)
				},
			}, nil
		}
	}
	return adapter.Lock{Lock: acquire(true), TryLock: acquire(false), Grants: func(what string) bool {
		return strings.HasSuffix(what, ": SET")
	}}
}

// redsyncNotHeld maps redsync's "not held" errors to locks.ErrNotHeld.
func redsyncNotHeld(err error) error {
	var taken *redsync.ErrTaken
	if errors.As(err, &taken) || errors.Is(err, redsync.ErrLockAlreadyExpired) {
		return adapter.NotHeld("redsync", err)
	}
	return err
}

// redsync claims mutual exclusion with expiry (crash safety), no fencing:
// run with Claims crash only, the suite must pass, lost updates of paused
// holders being expected violations. A waiting Lock sleeps redsync's
// retry delay in wall time, but its clients reach miniredis in memory
// (Backend.InProcess), so the scheduler sees a sleeping waiter as blocked
// within microseconds (5 runs took 5-15 s over the sleeps a quiescence
// test needs beside a socket). A run still takes about a quarter of a
// second: 8 runs by default, the suite's 500 under LOCKPROOF_DEEP=1.
func TestThirdPartyRedsync(t *testing.T) {
	suitemain.SetChecks(t, 8)
	ownClaims(t, 0x7ed51c, redsyncLock(), propertytest.Options{
		Claims: []propertytest.FaultKind{propertytest.FaultCrash},
	})
}

// Held to pause safety, which needs fencing, redsync must be caught
// losing an update of a paused holder: by default in the first run of its
// seed (quickSeed), under LOCKPROOF_DEEP=1 after a search of passing runs.
func TestThirdPartyRedsyncClaimingPause(t *testing.T) {
	suitemain.SetChecks(t, 200) // stops at the first failure
	strongerClaim(t, quickSeed(8312093, 0x7ed51c), redsyncLock(), propertytest.Options{
		Claims: []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultPause},
	}, propertytest.Exclusivity)
}
