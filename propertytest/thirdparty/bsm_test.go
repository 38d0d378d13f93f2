package thirdparty_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bsm/redislock"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
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
//   - Start: the manual clock before the call, and again each time Obtain
//     asks its retry strategy for the next backoff (just before it waits
//     and makes the next attempt): a lower bound of the successful
//     attempt's start. bsm gives no local validity; Deadline is lockproof's
//     start + TTL - locks.Drift(TTL).
//   - No fencing token: bsm's Token is the random owner value, not an
//     increasing number. The lease's Token reports none (ok false).
//   - Renew is Refresh(TTL); ErrNotObtained (not the owner) is
//     locks.ErrNotHeld. Unlock is Release; ErrLockNotHeld is
//     locks.ErrNotHeld.
func bsmLock() propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		r, err := fakes.StartRedis(fakes.ManualTime(epoch), fakes.ForceMiniredis())
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
				c := redislock.New(r.NewClient())
				return &adapted{name: name, opt: o, acquire: bsmAcquire(c, o.Prefix+name, o)}, nil
			},
			Clock:     r.Clock(),
			Advance:   r.Advance,
			InProcess: true,
		}, nil
	}
}

// stampedRetry is a retry strategy that notes the run's time whenever
// Obtain asks it for the next backoff.
type stampedRetry struct {
	redislock.RetryStrategy
	clock locks.Clock
	last  *time.Time
}

func (s stampedRetry) NextBackoff() time.Duration {
	*s.last = s.clock.Now() // on the Lock goroutine, before the next attempt
	return s.RetryStrategy.NextBackoff()
}

func bsmAcquire(c *redislock.Client, key string, o locks.Options) acquireFunc {
	return func(ctx context.Context, wait bool) (grant, error) {
		start := o.Clock.Now()
		var opt *redislock.Options
		if wait {
			opt = &redislock.Options{RetryStrategy: stampedRetry{redislock.LinearBackoff(bsmRetry), o.Clock, &start}}
		}
		l, err := c.Obtain(ctx, key, o.TTL, opt)
		switch {
		case errors.Is(err, redislock.ErrNotObtained):
			return grant{}, locked("redislock", err)
		case err != nil:
			return grant{}, err
		}
		return grant{ops: leaseOps{
			renew: func(ctx context.Context) error {
				err := l.Refresh(ctx, o.TTL, nil)
				if errors.Is(err, redislock.ErrNotObtained) {
					return notHeld("redislock", err)
				}
				return err
			},
			release: func(ctx context.Context) error {
				err := l.Release(ctx)
				if errors.Is(err, redislock.ErrLockNotHeld) {
					return notHeld("redislock", err)
				}
				return err
			},
		}, start: start}, nil
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
// losing an update of a paused holder.
func TestThirdPartyBsmRedislockClaimingPause(t *testing.T) {
	propertytest.SetChecks(t, 200) // stops at the first failure
	strongerClaim(t, 0xb5e, bsmLock(), propertytest.Options{
		Claims: []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultPause},
	}, propertytest.Exclusivity)
}
