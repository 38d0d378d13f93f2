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
// takeover a compare-and-set script. A stampLocker writes the expiry its
// client computed at the call, in a takeover that lands later too: its
// leases run from their call, and the suite judges them by the deadline
// each reports.
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

// The stamp scripts: KEYS[1] the lock. stampSet (KEYS[2] the fencing
// counter) sets ARGV[2] and returns the next token if the value is
// ARGV[1] ("": no value; "*": any value), else 0; stampRenew sets ARGV[2]
// and stampRelease deletes the key if the value's owner is ARGV[1] (the
// owner and its space), returning 1 if they acted.
var (
	stampSetScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if (ARGV[1] == '' and not v) or ARGV[1] == '*' or v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return redis.call('INCR', KEYS[2])
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
	tok, err := l.set(ctx, "", value)
	if err == nil && tok == 0 {
		tok, err = l.takeOver(ctx, value)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("mutants: acquire: %w", err)
	case tok == 0:
		return nil, fmt.Errorf("mutants: %w", locks.ErrLocked)
	}
	ops := &stampOps{client: l.client, key: l.key, owner: owner, ttl: l.opt.TTL, clock: l.opt.Clock}
	return handOver(ctx, locks.NewLease(locks.LeaseSpec{Name: l.name, Token: tok, Fenced: true, Start: start}, ops, l.opt), l.opt)
}

// set sets value, with a new token, if the key holds expected (see
// stampSetScript); the token is 0 if it did not.
func (l *stampLocker) set(ctx context.Context, expected, value string) (locks.Token, error) {
	tok, err := stampSetScript.Run(ctx, l.client, []string{l.key, l.fenceKey}, expected, value).Int64()
	return locks.Token(tok), err
}

// takeOver reads the holder's value and, if its expiry passed, replaces
// it with value if it is still the one read (THE BUG, without cas:
// whatever the key holds by then).
func (l *stampLocker) takeOver(ctx context.Context, value string) (locks.Token, error) {
	seen, err := l.client.Get(ctx, l.key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, nil // freed since the first try: the next attempt takes it
	case err != nil:
		return 0, err
	case !stampExpired(seen, l.opt.Clock.Now()):
		return 0, nil
	case l.cas:
		return l.set(ctx, seen, value)
	}
	return l.set(ctx, "*", value)
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
