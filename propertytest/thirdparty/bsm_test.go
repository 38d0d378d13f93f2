package thirdparty_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bsm/redislock"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// bsmRetry is the linear backoff of Obtain in Lock (wall time): short
// enough that a waiter sees a freed lock within the suite's Settle.
const bsmRetry = 2 * time.Millisecond

// bsmLock is the Factory of bsm/redislock with one go-redis v9 client per
// client on one miniredis in manual time, reached in memory
// (Backend.InProcess).
//
// Mapping:
//   - TryLock is Obtain with the default retry strategy (NoRetry): one
//     attempt; ErrNotObtained (the key holds another token) is
//     locks.ErrLocked. Lock is Obtain with a LinearBackoff(bsmRetry). Obtain
//     gives a ctx without a deadline one of TTL in wall time, so a Lock
//     that waits longer returns context.DeadlineExceeded: that is the
//     library's behaviour, kept (the suite records an unknown outcome).
//   - Start: the manual clock as the obtain script was let go, each
//     attempt (Lock.Grants: EVALSHA, or the EVAL go-redis falls back to):
//     the last one granted. bsm gives no local validity; Deadline is
//     lockproof's start + TTL - locks.Drift(TTL).
//   - No fencing token: bsm's Token is the random owner value, not an
//     increasing number. The lease's Token reports none (ok false).
//   - Renew is Refresh(TTL); ErrNotObtained (not the owner) is
//     locks.ErrNotHeld. Unlock is Release; ErrLockNotHeld is
//     locks.ErrNotHeld.
func bsmLock() propertytest.Factory {
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
				return adapter.New(name, o, bsmAdapter(redislock.New(r.NewClient()), o.Prefix+name, o))
			},
			Clock:     r.Clock(),
			Advance:   r.Advance,
			InProcess: true,
		}, nil
	}
}

// bsmAdapter describes bsm/redislock's Obtain on key to the kit.
func bsmAdapter(c *redislock.Client, key string, o locks.Options) adapter.Lock {
	obtain := func(opt *redislock.Options) func(context.Context) (adapter.Grant, error) {
		return func(ctx context.Context) (adapter.Grant, error) {
			l, err := c.Obtain(ctx, key, o.TTL, opt)
			switch {
			case errors.Is(err, redislock.ErrNotObtained):
				return adapter.Grant{}, adapter.Locked("redislock", err)
			case err != nil:
				return adapter.Grant{}, err
			}
			return adapter.Grant{
				Renew: func(ctx context.Context) error {
					err := l.Refresh(ctx, o.TTL, nil)
					if errors.Is(err, redislock.ErrNotObtained) {
						return adapter.NotHeld("redislock", err)
					}
					return err
				},
				Release: func(ctx context.Context) error {
					err := l.Release(ctx)
					if errors.Is(err, redislock.ErrLockNotHeld) {
						return adapter.NotHeld("redislock", err)
					}
					return err
				},
			}, nil
		}
	}
	return adapter.Lock{
		Lock:    obtain(&redislock.Options{RetryStrategy: redislock.LinearBackoff(bsmRetry)}),
		TryLock: obtain(nil),
		Grants: func(what string) bool {
			return strings.HasSuffix(what, ": EVALSHA") || strings.HasSuffix(what, ": EVAL")
		},
	}
}

// bsm/redislock claims mutual exclusion with expiry, no fencing: run with
// Claims crash only, the suite must pass. A waiting Obtain sleeps its
// retry back-off in wall time, but its clients reach miniredis in memory
// (Backend.InProcess), so the scheduler sees a sleeping waiter as blocked
// within microseconds: the default 15 runs take a fraction of a second
// (5 runs took 4-5 s over the sleeps a quiescence test needs beside a
// socket).
func TestThirdPartyBsmRedislock(t *testing.T) {
	ownClaims(t, 0xb5e, bsmLock(), propertytest.Options{
		Claims: []propertytest.FaultKind{propertytest.FaultCrash},
	})
}

// Held to pause safety, which needs fencing, bsm/redislock must be caught
// losing an update of a paused holder: by default in the first run of its
// seed (quickSeed), under LOCKPROOF_DEEP=1 after a search of passing runs.
func TestThirdPartyBsmRedislockClaimingPause(t *testing.T) {
	suitemain.SetChecks(t, 200) // stops at the first failure
	strongerClaim(t, quickSeed(2920, 0xb5e), bsmLock(), propertytest.Options{
		Claims: []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultPause},
	}, propertytest.Exclusivity)
}
