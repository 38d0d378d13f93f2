package mutants

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
)

// redisBug is the one defect of a setnxLocker.
type redisBug int

const (
	noRedisBug       redisBug = iota
	expireAfterSetNX          // SETNX, then PEXPIRE in a second command
	fenceExpires              // the fencing counter is given the lock's TTL
)

func init() {
	register(
		Mutant{Name: "setnx-then-expire", Breaks: propertytest.DeadlockFreedom,
			Bug:     "the key is taken with SETNX and given its TTL by a second command, so a client that dies between the two leaves a key that never expires",
			Factory: setnxFactory(expireAfterSetNX), Fixed: setnxFactory(noRedisBug), Options: claiming()},
		Mutant{Name: "fence-does-not-grow", Breaks: propertytest.Exclusivity,
			Bug:     "the fencing counter is given the lock's TTL (to keep Redis tidy), so once the lock sits free for a TTL the tokens start again at 1",
			Factory: setnxFactory(fenceExpires), Fixed: setnxFactory(noRedisBug), Options: claiming()},
	)
}

// setnxFactory is the Factory of a setnxLocker with bug b on a miniredis in
// manual time; every client has a connection of its own.
func setnxFactory(b redisBug) propertytest.Factory {
	return backends.OnMiniredis(func(c redis.UniversalClient, name string, opts ...locks.Option) (locks.Locker, error) {
		return newSetNXLocker(c, name, b, opts...)
	})
}

// setnxLocker is the textbook Redis lock: the key holds a random owner and
// expires after the TTL; Renew and Unlock are owner-checked scripts; a
// counter beside the key, incremented on every grant, gives the fencing
// token. Its bug, if any, is in how the key or the counter get their TTL.
type setnxLocker struct {
	client   redis.UniversalClient
	name     string
	key      string
	fenceKey string
	opt      locks.Options
	bug      redisBug
}

var _ locks.Locker = (*setnxLocker)(nil)

func newSetNXLocker(client redis.UniversalClient, name string, b redisBug, opts ...locks.Option) (*setnxLocker, error) {
	if err := locks.ValidateName(name); err != nil {
		return nil, fmt.Errorf("mutants: %w", err)
	}
	o, err := locks.Resolve("mutants:", opts...)
	if err != nil {
		return nil, fmt.Errorf("mutants: %w", err)
	}
	key := redislock.Key(o.Prefix, name) // redislock's layout, so the fake's ExpireLock finds it
	return &setnxLocker{client: client, name: name, key: key, fenceKey: key + ":fence", opt: o, bug: b}, nil
}

// TryLock makes one attempt; it returns locks.ErrLocked when the key is
// held. It reports locks.PointAcquired as soon as the key is ours and the
// token drawn; with expireAfterSetNX the key gets its TTL only after that.
func (l *setnxLocker) TryLock(ctx context.Context) (locks.Lease, error) {
	lease, _, err := l.try(ctx)
	return lease, err
}

// try is TryLock, also returning the holder's remaining TTL when the key
// is held (negative when the key has none).
func (l *setnxLocker) try(ctx context.Context) (locks.Lease, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("mutants: try lock: %w", err)
	}
	start, owner := l.opt.Clock.Now(), locks.NewOwner()
	ttl := l.opt.TTL.Milliseconds()
	if l.bug == expireAfterSetNX {
		ttl = 0 // the key is set without a TTL
	}
	fenceTTL := int64(0)
	if l.bug == fenceExpires {
		fenceTTL = l.opt.TTL.Milliseconds()
	}
	// One script takes the key and draws the token, so that tokens follow
	// the order of the grants even when a client stalls between requests.
	n, err := setnxGrantScript.Run(ctx, l.client, []string{l.key, l.fenceKey}, owner, ttl, fenceTTL).Int64()
	if err != nil {
		return nil, 0, fmt.Errorf("mutants: acquire: %w", err)
	}
	if n <= 0 {
		return nil, time.Duration(-n) * time.Millisecond, fmt.Errorf("mutants: %w", locks.ErrLocked)
	}
	tok := locks.Token(n)
	locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: l.name, Token: tok, Fenced: true})
	if l.bug == expireAfterSetNX {
		err = l.client.PExpire(ctx, l.key, l.opt.TTL).Err()
	}
	if err != nil {
		_ = l.ops(owner).Release(context.WithoutCancel(ctx)) // owner-checked
		return nil, 0, fmt.Errorf("mutants: acquire: %w", err)
	}
	spec := locks.LeaseSpec{Name: l.name, Token: tok, Fenced: true, Start: start}
	return locks.NewLease(spec, l.ops(owner), l.opt), 0, nil
}

// Lock waits out the holder's remaining TTL on the Locker's clock (a TTL
// when the key has none) and tries again, until ctx ends.
func (l *setnxLocker) Lock(ctx context.Context) (locks.Lease, error) {
	for {
		lease, pttl, err := l.try(ctx)
		if !errors.Is(err, locks.ErrLocked) {
			return lease, err
		}
		if pttl <= 0 {
			pttl = l.opt.TTL
		}
		if err := waitFor(ctx, l.opt.Clock, nil, l.opt.Clock.Now().Add(pttl)); err != nil {
			return nil, fmt.Errorf("mutants: lock: %w", err)
		}
	}
}

func (l *setnxLocker) ops(owner string) ownerOps {
	return ownerOps{client: l.client, key: l.key, owner: owner, ttl: l.opt.TTL}
}

// setnxGrantScript takes KEYS[1] for ARGV[1] with a TTL of ARGV[2] ms (none
// when 0) and returns the next token of the counter KEYS[2] (given a TTL of
// ARGV[3] ms unless 0); when the key is held it returns minus its
// remaining TTL in ms (0 when it has none).
var setnxGrantScript = redis.NewScript(`
local ok
if ARGV[2] == '0' then
  ok = redis.call('SET', KEYS[1], ARGV[1], 'NX')
else
  ok = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
end
if not ok then
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 then left = 0 end
  return -left
end
local tok = redis.call('INCR', KEYS[2])
if ARGV[3] ~= '0' then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return tok`)

// The owner-checked scripts: KEYS[1] the lock, ARGV[1] the owner (and
// ARGV[2] the TTL in ms for a renewal). Each returns 1 if it acted.
var (
	renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)
	releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
)

// ownerOps are one grant's owner-checked operations on one Redis key.
type ownerOps struct {
	client redis.Scripter
	key    string
	owner  string
	ttl    time.Duration
}

// Renew resets the key's TTL if the owner still holds it.
func (o ownerOps) Renew(ctx context.Context) error {
	return o.run(ctx, renewScript, "renew", o.owner, o.ttl.Milliseconds())
}

// Release deletes the key if the owner still holds it.
func (o ownerOps) Release(ctx context.Context) error {
	return o.run(ctx, releaseScript, "release", o.owner)
}

// run runs an owner-checked script: ErrNotHeld when it did nothing.
func (o ownerOps) run(ctx context.Context, s *redis.Script, what string, args ...any) error {
	return runOn(ctx, o.client, s, []string{o.key}, what, args...)
}

// runOn runs an owner-checked script on keys: ErrNotHeld when it did
// nothing.
func runOn(ctx context.Context, c redis.Scripter, s *redis.Script, keys []string, what string, args ...any) error {
	n, err := s.Run(ctx, c, keys, args...).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("mutants: %s: %w", what, err)
	case n == 0:
		return fmt.Errorf("mutants: %s: %w", what, locks.ErrNotHeld)
	}
	return nil
}
