package mutants

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
)

// semFlaw is the one defect of a flawedSemaphore, a counting semaphore of
// expiring permits on Redis (a sorted set of owners scored by the end of
// their leases, and a fencing counter). Each reproduces a bug reported
// against a real semaphore; the comments name the report.
type semFlaw int

const (
	noSemFlaw semFlaw = iota
	// The live permits are counted in one request and the caller's permit
	// added in a second one, so two callers that both counted N-1 both add
	// theirs (python-zk/kazoo issue #213).
	semCountThenAdd
	// Permits have no expiry of their own: the holders are counted as
	// they are, and a holder that crashed keeps its permit for good
	// (redisson/redisson issue #2045).
	semNoPermitExpiry
	// A renewal writes the caller's permit back with a fresh expiry
	// without checking that it still holds one, so a renewal that lands
	// after the permit expired and went to another client brings it back:
	// one permit more than there are (the semaphore form of
	// sbertrang/redis-distlock issue #2, renew-sets-without-owner-check).
	semRenewResurrects
)

// semPermits is the number of permits of the semaphore mutants, and
// semClients the clients the suite runs against them.
const semPermits, semClients = 2, 4

func init() {
	fixed := semaphoreFactory(noSemFlaw)
	options := claiming()
	options.Permits, options.Clients = semPermits, semClients
	mutant := func(name string, f semFlaw, breaks propertytest.Property, bug string) Mutant {
		return Mutant{Name: name, Bug: bug, Breaks: breaks, Factory: semaphoreFactory(f), Fixed: fixed, Options: options}
	}
	register(
		// python-zk/kazoo issue #213, "Non-blocking semaphore can lead to
		// double acquire", fixed by PR #214 ("Make sure Semaphore uses
		// get_lease inside of lock"): a non-blocking acquire read the
		// lease holders and created its lease outside the lock that
		// serialises the others, and three processes of a semaphore of
		// one lease printed two holders.
		mutant("semaphore-count-then-add", semCountThenAdd, propertytest.Exclusivity,
			"an acquire counts the live permits in one request and adds its own in a second one (kazoo issue #213), so two clients that both counted N-1 both take a permit: N+1 holders"),
		// redisson/redisson issue #2045, "RedissonSemaphore doesn't take
		// linux machine's down into account, like RedissonLock do": a
		// permit of RSemaphore is a count with no lease, and one taken by
		// a process that died is never given back.
		mutant("semaphore-permits-never-expire", semNoPermitExpiry, propertytest.DeadlockFreedom,
			"the permits are counted without pruning the expired ones (Redisson issue #2045): a holder that crashed keeps its permit for good, and once every permit went that way the semaphore refuses everyone"),
		// The permit-by-permit form of sbertrang/redis-distlock issue #2
		// ("extent"), which renew-sets-without-owner-check imitates for
		// the mutex: the renewal does not look whose the permit is. A
		// renewal that lands late brings back a permit whose lease, taken
		// from the renewal's call, has ended: the permit holds a place
		// that no lease holds, and the suite may first see an acquire
		// refused while fewer than N leases run, deadlock freedom (seen
		// under LOCKPROOF_DEEP, seed 3358965995771665889: a renewal held
		// up for TTL + Slack, then a refusal while one permit of two ran).
		mutant("semaphore-renewal-resurrects", semRenewResurrects, propertytest.Exclusivity,
			"a renewal ZADDs the caller's permit with a fresh expiry without checking that it still holds one, so a renewal that lands after the permit expired and went to another client brings it back: N+1 holders").also(propertytest.Symmetry, propertytest.DeadlockFreedom),
	)
}

// semaphoreFactory is the Factory of a flawedSemaphore of semPermits
// permits with flaw f, on a miniredis in manual time; every client has a
// connection of its own.
func semaphoreFactory(f semFlaw) propertytest.Factory {
	return backends.OnMiniredis(func(c redis.UniversalClient, name string, opts ...locks.Option) (locks.Locker, error) {
		base, err := newSetNXLocker(c, name, noRedisBug, opts...) // its name, key and options
		if err != nil {
			return nil, err
		}
		key := base.key + ":sem"
		return &flawedSemaphore{client: c, name: name, keys: []string{key, key + ":fence"}, opt: base.opt, flaw: f}, nil
	})
}

// flawedSemaphore is a semaphore of semPermits expiring permits with one
// flaw; without one it is correct (each step one script on the server's
// clock, expired permits pruned first).
type flawedSemaphore struct {
	client redis.UniversalClient
	name   string
	keys   []string // the permits' sorted set, the fencing counter
	opt    locks.Options
	flaw   semFlaw
}

var _ locks.Locker = (*flawedSemaphore)(nil)

// semNow sets now to the server's clock in µs; semPrune drops the permits
// that ended by then.
const (
	semNow   = "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
	semPrune = "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
)

// Scripts. ARGV: owner, ttl µs, permits. semCountScript answers the
// number of live permits; semAddScript adds the owner's and answers its
// token; semTakeScript does both in one step (0 when all are held).
var (
	semCountScript   = redis.NewScript(semNow + semPrune + "return redis.call('ZCARD', KEYS[1])")
	semAddScript     = redis.NewScript(semNow + "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])\nreturn redis.call('INCR', KEYS[2])")
	semTakeScript    = redis.NewScript(semNow + semPrune + semTakeBody)
	semTakeNoPrune   = redis.NewScript(semNow + semTakeBody)
	semRenewScript   = redis.NewScript(semNow + semPrune + "if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end\nredis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])\nreturn 1")
	semRenewBlindly  = redis.NewScript(semNow + "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])\nreturn 1")
	semReleaseScript = redis.NewScript(semNow + semPrune + "return redis.call('ZREM', KEYS[1], ARGV[1])")
)

const semTakeBody = `if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return redis.call('INCR', KEYS[2])`

// TryLock takes a permit if one is free; locks.ErrLocked when all are held.
func (s *flawedSemaphore) TryLock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mutants: try lock: %w", err)
	}
	start, owner := s.opt.Clock.Now(), locks.NewOwner()
	args := []any{owner, s.opt.TTL.Microseconds(), semPermits}
	var tok int64
	var err error
	switch s.flaw {
	case semCountThenAdd:
		var n int64
		if n, err = semCountScript.Run(ctx, s.client, s.keys, args...).Int64(); err == nil {
			if n >= semPermits {
				return nil, fmt.Errorf("mutants: %w", locks.ErrLocked)
			}
			tok, err = semAddScript.Run(ctx, s.client, s.keys, args...).Int64()
		}
	case semNoPermitExpiry:
		tok, err = semTakeNoPrune.Run(ctx, s.client, s.keys, args...).Int64()
	default:
		tok, err = semTakeScript.Run(ctx, s.client, s.keys, args...).Int64()
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("mutants: acquire: %w", err)
	case tok == 0:
		return nil, fmt.Errorf("mutants: %w", locks.ErrLocked)
	}
	ops := semOps{ownerOps: ownerOps{client: s.client, key: s.keys[0], owner: owner, ttl: s.opt.TTL}, flaw: s.flaw}
	return handOver(ctx, locks.NewLease(locks.LeaseSpec{Name: s.name, Token: locks.Token(tok), Fenced: true, Start: start}, ops, s.opt), s.opt)
}

// Lock retries TryLock every TTL/10 of the semaphore's clock.
func (s *flawedSemaphore) Lock(ctx context.Context) (locks.Lease, error) {
	return retryEvery(ctx, s.opt, s.TryLock)
}

// semOps are one permit's renewal and release: ownerOps's scripts
// replaced by the semaphore's on its sorted set.
type semOps struct {
	ownerOps
	flaw semFlaw
}

func (o semOps) Renew(ctx context.Context) error {
	script := semRenewScript
	if o.flaw == semRenewResurrects {
		script = semRenewBlindly
	}
	return o.run(ctx, script, "renew", o.owner, o.ttl.Microseconds())
}

func (o semOps) Release(ctx context.Context) error {
	return o.run(ctx, semReleaseScript, "release", o.owner)
}
