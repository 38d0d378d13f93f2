package mutants

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
)

// redisFlaw is the one defect of a flawedLocker. Each reproduces a bug
// reported against a real Redis lock; the comments name the report.
type redisFlaw int

const (
	noRedisFlaw redisFlaw = iota
	// Unlock reads the key, compares the owner in the client, then
	// deletes it with a second command (redis/redis-py PR #1031).
	unlockGetThenDel
	// The drift allowance is added to the validity instead of taken from
	// it (SPSCommerce/redlock-py PR #3).
	validityAddsDrift
	// A renewal the owner-checked script refused (it answered 0) counts
	// as done (go-redsync/redsync PRs #38 and #61).
	renewIgnoresRefusal
	// A renewal SETs the key to the owner with a fresh TTL, whoever holds
	// it (sbertrang/redis-distlock issue #2).
	renewSetsBlindly
	// A renewal PEXPIREs the key, whoever holds it, and counts a key that
	// exists as renewed (redisson/redisson issue #597).
	renewExtendsAnyOwner
	// Done and Err never tell of a lost lease; only Unlock ends it
	// (redisson/redisson issue #4698).
	lossOnlyLogged
)

func init() {
	fixed := flawedFactory(noRedisFlaw)
	mutant := func(name string, f redisFlaw, breaks propertytest.Property, bug string) Mutant {
		return Mutant{Name: name, Bug: bug, Breaks: breaks, Factory: flawedFactory(f), Fixed: fixed, Options: claiming()}
	}
	register(
		// redis/redis-py PR #1031, "Fix race condition in
		// redis.lock.Lock.release": release WATCHed the key but never
		// entered MULTI, so its GET and DEL ran as two plain commands.
		// Its DEL reaches Redis when its caller no longer holds the key and
		// changes the lock: symmetry, as unlock-without-owner-check. The
		// same DEL frees the lock under its new holder, and when a third
		// client is granted it next while the Unlock's reply is late, the
		// history reads best as that double grant: exclusivity, the harm
		// redis-py's report describes (seen in CI, seed 3170736255304292603).
		mutant("unlock-get-then-del", unlockGetThenDel, propertytest.Symmetry,
			"Unlock GETs the key, compares the owner in the client and DELs the key in a second command (redis-py PR #1031), so a key that expired and went to another client in between is deleted under its new holder").also(propertytest.Exclusivity),
		// SPSCommerce/redlock-py PR #3, "Fix logic when calculating
		// validity": ttl - (elapsed - drift) instead of ttl - elapsed - drift.
		mutant("validity-adds-drift", validityAddsDrift, propertytest.Exclusivity,
			"the lease's validity is TTL - (elapsed - drift) instead of TTL - elapsed - drift (redlock-py PR #3), so the holder believes in its lease for a drift allowance after the key expired"),
		// go-redsync/redsync PR #38, "fix bug in Extend() and Unlock()",
		// and PR #61, "Fix Extend and Unlock": the script's 0 was
		// compared with an int, never equal to the int64 reply, so
		// Extend reported success for a lock it no longer held.
		mutant("renew-ignores-refusal", renewIgnoresRefusal, propertytest.Exclusivity,
			"a renewal whose owner-checked script answered 0 (not the owner) is reported as done (redsync PRs #38 and #61), so a holder whose renewal reached Redis after its key expired and went to another client believes it still holds the lock").also(propertytest.Symmetry),
		// sbertrang/redis-distlock issue #2, "extent": extending did not
		// check that the key's value was still the caller's.
		mutant("renew-sets-without-owner-check", renewSetsBlindly, propertytest.Exclusivity,
			"a renewal SETs the key to the caller's owner with a fresh TTL without checking who holds it (redis-distlock issue #2), so a renewal that lands after the key went to another client takes it back").also(propertytest.Symmetry),
		// redisson/redisson issue #597, "Check that RLock still belongs to
		// owner during renewal expiration": the watchdog's renewal reset
		// the key's TTL without looking at whose key it was.
		mutant("renew-extends-any-owner", renewExtendsAnyOwner, propertytest.Exclusivity,
			"a renewal PEXPIREs the key without checking that the caller still owns it (Redisson issue #597), so a renewal that lands after the key went to another client extends that client's key and reports success").also(propertytest.Symmetry),
		// redisson/redisson issue #4698, "Add a callback on lock renewal
		// failure": the watchdog logs a failed renewal and nothing tells
		// the application that the lock is gone.
		mutant("renewal-failure-only-logged", lossOnlyLogged, propertytest.Exclusivity,
			"the lease never signals its loss: a failed renewal is only logged (Redisson issue #4698), and Done stays open and Err nil past the deadline and after Redis refused a renewal, until Unlock"),
	)
}

// flawedFactory is the Factory of a flawedLocker with flaw f.
func flawedFactory(f redisFlaw) propertytest.Factory {
	return onSetNX(func(base *setnxLocker) locks.Locker { return &flawedLocker{setnxLocker: base, flaw: f} })
}

// onSetNX is the Factory of the Lockers lock makes of a bug-free
// setnxLocker (its client, key, options and fencing counter), on a
// miniredis in manual time; every client has a connection of its own.
func onSetNX(lock func(base *setnxLocker) locks.Locker) propertytest.Factory {
	return backends.OnMiniredis(func(c redis.UniversalClient, name string, opts ...locks.Option) (locks.Locker, error) {
		base, err := newSetNXLocker(c, name, noRedisBug, opts...)
		if err != nil {
			return nil, err
		}
		return lock(base), nil
	})
}

// flawedLocker is a SET NX PX lock with a random owner and a fencing
// counter drawn in the same script (setnxLocker's key and counter) with
// one flaw in how its lease is timed,
// renewed, released or watched.
type flawedLocker struct {
	*setnxLocker
	flaw redisFlaw
}

var _ locks.Locker = (*flawedLocker)(nil)

// TryLock makes one attempt: SET NX PX and the token in one script. It
// returns locks.ErrLocked when another owner holds the key.
func (l *flawedLocker) TryLock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mutants: try lock: %w", err)
	}
	start, owner := l.opt.Clock.Now(), locks.NewOwner()
	tok, err := l.grant(ctx, owner)
	if err != nil {
		return nil, err
	}
	ops := flawedOps{ownerOps: l.ops(owner), client: l.client, flaw: l.flaw}
	if l.flaw == validityAddsDrift {
		// validity = TTL - (elapsed - drift): the drift allowance lands
		// on the wrong side, twice over the honest deadline's.
		start = start.Add(2 * locks.Drift(l.opt.TTL))
	}
	lease, err := handOver(ctx, locks.NewLease(locks.LeaseSpec{Name: l.name, Token: tok, Fenced: true, Start: start}, ops, l.opt), l.opt)
	if err == nil && l.flaw == lossOnlyLogged {
		lease = newQuietLease(lease, false)
	}
	return lease, err
}

// grantScript sets KEYS[1] to the owner ARGV[1] for ARGV[2] ms if the key
// is free and then returns the next value of the fencing counter KEYS[2],
// in one step; it returns 0 if the key was taken. A token drawn by a
// request of its own could come after a successor's, should the client
// stall between the two.
var grantScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0`)

// grant takes the key for owner with grantScript: the token, or
// locks.ErrLocked.
func (l *setnxLocker) grant(ctx context.Context, owner string) (locks.Token, error) {
	tok, err := grantScript.Run(ctx, l.client, []string{l.key, l.fenceKey}, owner, l.opt.TTL.Milliseconds()).Int64()
	switch {
	case err != nil:
		return 0, fmt.Errorf("mutants: acquire: %w", err)
	case tok == 0:
		return 0, fmt.Errorf("mutants: %w", locks.ErrLocked)
	}
	return locks.Token(tok), nil
}

// handOver returns a granted lease, reporting locks.PointAcquired, if it
// is still valid. One whose validity ran out before the grant's answer
// arrived (its client stalled that long) is released, owner-checked, and
// reported as locks.ErrLeaseExpired, as redislock does: a grant nobody
// can use is no grant, and its outcome is unknown to the caller.
func handOver(ctx context.Context, lease locks.Lease, o locks.Options) (locks.Lease, error) {
	if err := lease.Err(); err != nil {
		_ = lease.Unlock(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("mutants: acquired too late: %w", err)
	}
	tok, fenced := lease.Token()
	locks.Observe(ctx, o.Observer, locks.Event{Point: locks.PointAcquired, Name: lease.Name(), Token: tok, Fenced: fenced})
	return lease, nil
}

// Lock retries TryLock every TTL/10 of the Locker's clock.
func (l *flawedLocker) Lock(ctx context.Context) (locks.Lease, error) {
	return retryEvery(ctx, l.opt, l.TryLock)
}

// flawedOps are one grant's renewal and release, owner-checked scripts
// unless the flaw is in one of them.
type flawedOps struct {
	ownerOps
	client redis.UniversalClient
	flaw   redisFlaw
}

// Renew resets the key's TTL.
func (o flawedOps) Renew(ctx context.Context) error {
	switch o.flaw {
	case renewIgnoresRefusal:
		// The script's answer is not looked at, only whether it ran.
		if err := renewScript.Run(ctx, o.client, []string{o.key}, o.owner, o.ttl.Milliseconds()).Err(); err != nil {
			return fmt.Errorf("mutants: renew: %w", err)
		}
		return nil
	case renewSetsBlindly:
		if err := o.client.Set(ctx, o.key, o.owner, o.ttl).Err(); err != nil {
			return fmt.Errorf("mutants: renew: %w", err)
		}
		return nil
	case renewExtendsAnyOwner:
		ok, err := o.client.PExpire(ctx, o.key, o.ttl).Result()
		switch {
		case err != nil:
			return fmt.Errorf("mutants: renew: %w", err)
		case !ok:
			return fmt.Errorf("mutants: renew: no key: %w", locks.ErrNotHeld)
		}
		return nil
	}
	return o.ownerOps.Renew(ctx)
}

// Release deletes the key if the owner holds it.
func (o flawedOps) Release(ctx context.Context) error {
	if o.flaw != unlockGetThenDel {
		return o.ownerOps.Release(ctx)
	}
	v, err := o.client.Get(ctx, o.key).Result()
	switch {
	case errors.Is(err, redis.Nil) || (err == nil && v != o.owner):
		return fmt.Errorf("mutants: release: %w", locks.ErrNotHeld)
	case err != nil:
		return fmt.Errorf("mutants: release: %w", err)
	}
	// The owner was ours when GET answered; DEL deletes whatever is
	// there now.
	if err := o.client.Del(ctx, o.key).Err(); err != nil {
		return fmt.Errorf("mutants: release: %w", err)
	}
	return nil
}

// quietLease hides its lease's loss: Done stays open and Err nil until
// Unlock, whatever the deadline says. With heedRefusal, a renewal the
// backend refused with locks.ErrNotHeld does end it: the server's answer
// is the only loss it hears of.
type quietLease struct {
	locks.Lease
	heedRefusal bool

	once sync.Once
	done chan struct{}
	mu   sync.Mutex
	err  error
}

func newQuietLease(l locks.Lease, heedRefusal bool) *quietLease {
	return &quietLease{Lease: l, heedRefusal: heedRefusal, done: make(chan struct{})}
}

// Done is closed by Unlock, and with heedRefusal by a refused renewal.
func (q *quietLease) Done() <-chan struct{} { return q.done }

// Err is why Done was closed, or nil.
func (q *quietLease) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

func (q *quietLease) end(err error) {
	q.once.Do(func() {
		q.mu.Lock()
		q.err = err
		q.mu.Unlock()
		close(q.done)
	})
}

// Renew renews the lease; its error is returned but, unless heedRefusal
// and the backend refused, goes no further (a log line, in the library).
func (q *quietLease) Renew(ctx context.Context) error {
	err := q.Lease.Renew(ctx)
	if q.heedRefusal && errors.Is(err, locks.ErrNotHeld) {
		q.end(err)
	}
	return err
}

// Unlock releases the lease and ends it.
func (q *quietLease) Unlock(ctx context.Context) error {
	err := q.Lease.Unlock(ctx)
	q.end(fmt.Errorf("mutants: %w", locks.ErrReleased))
	return err
}
