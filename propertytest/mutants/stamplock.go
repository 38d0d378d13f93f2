package mutants

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
)

func init() {
	// phpnode/YiiRedis PR #18, "prevent race condition when handling
	// expired locks": ARedisMutex took a lock whose stored expiry had
	// passed after reading it with GET, so clients that read the same
	// expired value all went ahead; the fix is the GETSET takeover of the
	// "Handling deadlocks" section of Redis's SETNX page.
	register(Mutant{Name: "expired-takeover-get-then-set", Breaks: propertytest.Exclusivity,
		Bug:     "a SETNX lock that keeps its expiry in the key's value takes over an expired lock by a GET, a check in the client and a plain SET (the race of YiiRedis PR #18), so two clients that read the same expired value both take the lock",
		Factory: stampFactory(false), Fixed: stampFactory(true), Options: claiming()})
}

// stampFactory is the Factory of stampLockers; casTakeover makes the
// takeover a compare-and-set script.
func stampFactory(casTakeover bool) propertytest.Factory {
	return onSetNX(func(base *setnxLocker) locks.Locker { return &stampLocker{setnxLocker: base, cas: casTakeover} })
}

// stampLocker is the SETNX lock of the days before SET PX: the key never
// expires in Redis; its value is "<owner> <expiry>" (the expiry in Unix
// nanoseconds on the clients' clock), and a client that finds the expiry
// passed takes the lock over. The fencing counter is setnxLocker's.
type stampLocker struct {
	*setnxLocker
	cas bool // take over with a compare-and-set script, not GET then SET
}

var _ locks.Locker = (*stampLocker)(nil)

// stampValue is the key's value for owner until expires.
func stampValue(owner string, expires time.Time) string {
	return owner + " " + strconv.FormatInt(expires.UnixNano(), 10)
}

// stampExpired reports whether value's expiry is not after now; a value
// that cannot be read counts as expired.
func stampExpired(value string, now time.Time) bool {
	_, exp, _ := strings.Cut(value, " ")
	ns, err := strconv.ParseInt(exp, 10, 64)
	return err != nil || !now.Before(time.Unix(0, ns))
}

// The stamp scripts: KEYS[1] the lock. takeover sets ARGV[2] if the value
// is still ARGV[1]; stampRenew sets ARGV[2] and stampRelease deletes the
// key if the value's owner is ARGV[1] (the owner and its space). Each
// returns 1 if it acted.
var (
	takeoverScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0`)
	stampRenewScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0`)
	stampReleaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
)

// TryLock takes the key with SETNX, or takes over a key whose expiry has
// passed; it returns locks.ErrLocked otherwise.
func (l *stampLocker) TryLock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mutants: try lock: %w", err)
	}
	start, owner := l.opt.Clock.Now(), locks.NewOwner()
	value := stampValue(owner, start.Add(l.opt.TTL))
	won, err := l.client.SetNX(ctx, l.key, value, 0).Result()
	if err == nil && !won {
		won, err = l.takeOver(ctx, value)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("mutants: acquire: %w", err)
	case !won:
		return nil, fmt.Errorf("mutants: %w", locks.ErrLocked)
	}
	ops := &stampOps{client: l.client, key: l.key, owner: owner, ttl: l.opt.TTL, clock: l.opt.Clock}
	tok, err := l.nextToken(ctx)
	if err != nil {
		_ = ops.Release(context.WithoutCancel(ctx)) // owner-checked
		return nil, fmt.Errorf("mutants: acquire: %w", err)
	}
	locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: l.name, Token: tok, Fenced: true})
	return locks.NewLease(locks.LeaseSpec{Name: l.name, Token: tok, Fenced: true, Start: start}, ops, l.opt), nil
}

// takeOver reads the holder's value and, if its expiry passed, replaces
// it with value: in one script with cas, else by a plain SET after the
// GET (THE BUG: whatever the key holds by then).
func (l *stampLocker) takeOver(ctx context.Context, value string) (bool, error) {
	seen, err := l.client.Get(ctx, l.key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil // freed since the SETNX: the next attempt takes it
	case err != nil:
		return false, err
	case !stampExpired(seen, l.opt.Clock.Now()):
		return false, nil
	case l.cas:
		n, err := takeoverScript.Run(ctx, l.client, []string{l.key}, seen, value).Int64()
		return n == 1, err
	}
	return true, l.client.Set(ctx, l.key, value, 0).Err()
}

// Lock retries TryLock every TTL/10 of the Locker's clock.
func (l *stampLocker) Lock(ctx context.Context) (locks.Lease, error) {
	return retryEvery(ctx, l.opt, l.TryLock)
}

// stampOps are one grant's owner-checked renewal (a new expiry in the
// value) and release.
type stampOps struct {
	client redis.Scripter
	key    string
	owner  string
	ttl    time.Duration
	clock  locks.Clock
}

// Renew writes a new expiry, a TTL from now, if the owner holds the key.
func (o *stampOps) Renew(ctx context.Context) error {
	value := stampValue(o.owner, o.clock.Now().Add(o.ttl))
	return ownerOps{client: o.client, key: o.key}.run(ctx, stampRenewScript, "renew", o.owner+" ", value)
}

// Release deletes the key if the owner holds it.
func (o *stampOps) Release(ctx context.Context) error {
	return ownerOps{client: o.client, key: o.key}.run(ctx, stampReleaseScript, "release", o.owner+" ")
}
