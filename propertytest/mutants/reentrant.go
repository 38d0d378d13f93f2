package mutants

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
)

// reentryBug is the one defect of a countLocker.
type reentryBug int

const (
	noReentryBug       reentryBug = iota
	unlockIgnoresCount            // any Unlock deletes the hash, whatever the count
	reentryResetsTTL              // a re-entry sets the key's TTL to its own lease time
)

func init() {
	register(
		Mutant{Name: "reentry-unlock-ignores-count", Breaks: propertytest.Exclusivity,
			Bug: "re-entry is counted but Unlock deletes the lock whatever the count, so the inner Unlock of a nested " +
				"acquisition frees the lock under the outer hold",
			Factory: countFactory(unlockIgnoresCount), Fixed: countFactory(noReentryBug), Options: claiming()},
		Mutant{Name: "reentry-resets-ttl", Breaks: propertytest.Exclusivity,
			Bug: "a re-entry sets the key's TTL to the lease time of the re-entering call (as Redisson's RLock script " +
				"does with PEXPIRE), so a nested acquisition with a shorter lease time cuts the outer hold's TTL short",
			Factory: countFactory(reentryResetsTTL), Fixed: countFactory(noReentryBug), Options: claiming()},
	)
}

// countFactory is the Factory of a countLocker with bug b: the backend of
// setnxFactory (a miniredis in manual time, a connection per client), on
// whose setnxLocker each countLocker is built.
func countFactory(b reentryBug) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		be, err := setnxFactory(noRedisBug)(env)
		if err != nil {
			return nil, err
		}
		newBase := be.NewLocker
		be.NewLocker = func(name string, opts ...locks.Option) (locks.Locker, error) {
			l, err := newBase(name, opts...)
			if err != nil {
				return nil, err
			}
			base := l.(*setnxLocker)
			return &countLocker{client: base.client, name: base.name, keys: []string{base.key, base.fenceKey}, opt: base.opt, bug: b}, nil
		}
		return be, nil
	}
}

// countLocker is a reentrant lock kept on the server, as Redisson's RLock
// keeps it: a hash whose field named by the owner holds the hold count,
// and whose field "~fence" holds the acquisition's fencing token. The
// suite never acquires twice through one client, so every acquisition here
// is used the way reentrant code uses a lock: Lock, then a nested Lock by
// the same owner with a lease time of a quarter TTL (a helper called under
// the lock), whose Unlock comes before the outer lease is returned.
// Without a bug the nested pair leaves the outer hold as it was.
//
// The owner is one acquisition's call chain (an owner id drawn per outer
// acquisition), not the Locker: the suite's clients keep their Locker
// after a crash, and an owner per Locker would re-enter the hold its
// crashed acquisition left, with the same token, which the suite's lease
// model (every grant a new owner) reads as a double grant.
type countLocker struct {
	client redis.UniversalClient
	name   string
	keys   []string // the hash, the fencing counter
	opt    locks.Options
	bug    reentryBug
}

var _ locks.Locker = (*countLocker)(nil)

// TryLock makes one attempt, with its nested re-entry.
func (l *countLocker) TryLock(ctx context.Context) (locks.Lease, error) {
	lease, _, err := l.try(ctx)
	return lease, err
}

// Lock waits out the holder's remaining TTL on the Locker's clock and
// tries again, until ctx ends.
func (l *countLocker) Lock(ctx context.Context) (locks.Lease, error) {
	for {
		lease, pttl, err := l.try(ctx)
		if !errors.Is(err, locks.ErrLocked) {
			return lease, err
		}
		if err := waitFor(ctx, l.opt.Clock, nil, l.opt.Clock.Now().Add(max(pttl, time.Millisecond))); err != nil {
			return nil, fmt.Errorf("mutants: lock: %w", err)
		}
	}
}

// try acquires for the owner, then re-enters with a quarter of the TTL
// and unlocks the re-entry. When the lock is held by another owner it
// returns locks.ErrLocked and the holder's remaining TTL.
func (l *countLocker) try(ctx context.Context) (locks.Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("mutants: try lock: %w", err)
	}
	start, owner := l.opt.Clock.Now(), locks.NewOwner()
	status, v, err := l.acquire(ctx, owner, l.opt.TTL)
	switch {
	case err != nil:
		return nil, 0, err
	case status == 0:
		return nil, time.Duration(v) * time.Millisecond, fmt.Errorf("mutants: %w", locks.ErrLocked)
	}
	tok := locks.Token(v)
	locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: l.name, Token: tok, Fenced: true})
	ops := countOps{l: l, owner: owner}
	if err := l.nested(ctx, owner, tok); err != nil {
		_ = ops.Release(context.WithoutCancel(ctx)) // owner-checked
		return nil, 0, err
	}
	return locks.NewLease(locks.LeaseSpec{Name: l.name, Token: tok, Fenced: true, Start: start}, ops, l.opt), 0, nil
}

// nested is the re-entry and its Unlock that reentrant code makes under
// the outer hold.
func (l *countLocker) nested(ctx context.Context, owner string, tok locks.Token) error {
	status, v, err := l.acquire(ctx, owner, l.opt.TTL/4)
	switch {
	case err != nil:
		return err
	case status != 2 || locks.Token(v) != tok:
		return fmt.Errorf("mutants: re-entry answered %d, %d under token %v", status, v, tok)
	}
	return countOps{l: l, owner: owner}.Release(ctx)
}

// acquire runs countAcquireScript for owner with lease time ttl: status 1 and the
// token for a new acquisition, 2 and the token for a re-entry, 0 and the
// holder's remaining TTL in ms when another owner holds the lock.
func (l *countLocker) acquire(ctx context.Context, owner string, ttl time.Duration) (status, v int64, err error) {
	mode := "max"
	if l.bug == reentryResetsTTL {
		mode = "set"
	}
	r, err := countAcquireScript.Run(ctx, l.client, l.keys, owner, ttl.Milliseconds(), mode).Int64Slice()
	if err != nil {
		return 0, 0, fmt.Errorf("mutants: acquire: %w", err)
	}
	if len(r) != 2 {
		return 0, 0, fmt.Errorf("mutants: acquire: unexpected reply %v", r)
	}
	return r[0], r[1], nil
}

// countAcquireScript: KEYS[1] the hash, KEYS[2] the fencing counter; ARGV
// the owner, the lease time in ms, and how a re-entry sets the TTL: "max"
// keeps the longer of the key's and its own, "set" sets its own.
var countAcquireScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  local tok = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], ARGV[1], 1, '~fence', tok)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tok}
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  if ARGV[3] == 'set' or redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return {2, tonumber(redis.call('HGET', KEYS[1], '~fence'))}
end
return {0, math.max(redis.call('PTTL', KEYS[1]), 0)}`)

// countReleaseScript: KEYS[1] the hash; ARGV the owner and "count" (one
// hold less, the key deleted at zero) or "del" (deleted at once). It
// returns 0 when the owner holds nothing.
var countReleaseScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
if ARGV[2] == 'del' or redis.call('HINCRBY', KEYS[1], ARGV[1], -1) <= 0 then
  redis.call('DEL', KEYS[1])
end
return 1`)

// countRenewScript: KEYS[1] the hash; ARGV the owner and the TTL in ms.
var countRenewScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])`)

// countOps are the owner-checked operations of a countLocker's holds.
type countOps struct {
	l     *countLocker
	owner string
}

// Renew resets the key's TTL if the owner holds it.
func (o countOps) Renew(ctx context.Context) error {
	return o.key().run(ctx, countRenewScript, "renew", o.owner, o.l.opt.TTL.Milliseconds())
}

// Release ends one hold of the owner's.
func (o countOps) Release(ctx context.Context) error {
	how := "count"
	if o.l.bug == unlockIgnoresCount {
		how = "del"
	}
	return o.key().run(ctx, countReleaseScript, "release", o.owner, how)
}

// key is the hash as setnxLocker's owner-checked operations see a key.
func (o countOps) key() ownerOps { return ownerOps{client: o.l.client, key: o.l.keys[0]} }
