package mutants

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
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
	return func(t testing.TB) (*propertytest.Backend, error) {
		r := fakes.Redis(t, fakes.ManualTime(epoch), fakes.ForceMiniredis())
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				return newSetNXLocker(r.NewClient(), name, b, append(r.LockOptions(), opts...)...)
			},
			Clock:   r.Clock(),
			Advance: r.Advance,
		}, nil
	}
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
	key := o.Prefix + "{" + name + "}"
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
	ttl := l.opt.TTL
	if l.bug == expireAfterSetNX {
		ttl = 0 // go-redis sends a plain SETNX
	}
	won, err := l.client.SetNX(ctx, l.key, owner, ttl).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("mutants: acquire: %w", err)
	}
	if !won {
		pttl, err := l.client.PTTL(ctx, l.key).Result()
		if err != nil {
			pttl = l.opt.TTL
		}
		return nil, pttl, fmt.Errorf("mutants: %w", locks.ErrLocked)
	}
	tok, err := l.nextToken(ctx)
	if err == nil {
		locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: l.name, Token: tok, Fenced: true})
		if l.bug == expireAfterSetNX {
			err = l.client.PExpire(ctx, l.key, l.opt.TTL).Err()
		}
	}
	if err != nil {
		_ = l.ops(owner).Release(context.WithoutCancel(ctx)) // owner-checked
		return nil, 0, fmt.Errorf("mutants: acquire: %w", err)
	}
	spec := locks.LeaseSpec{Name: l.name, Token: tok, Fenced: true, Start: start}
	return locks.NewLease(spec, l.ops(owner), l.opt), 0, nil
}

// nextToken increments the fencing counter; with fenceExpires it also
// gives the counter the lock's TTL.
func (l *setnxLocker) nextToken(ctx context.Context) (locks.Token, error) {
	var incr *redis.IntCmd
	_, err := l.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		incr = p.Incr(ctx, l.fenceKey)
		if l.bug == fenceExpires {
			p.PExpire(ctx, l.fenceKey, l.opt.TTL)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return locks.Token(incr.Val()), nil
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
	n, err := s.Run(ctx, o.client, []string{o.key}, args...).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("mutants: %s: %w", what, err)
	case n == 0:
		return fmt.Errorf("mutants: %s: %w", what, locks.ErrNotHeld)
	}
	return nil
}
