package mutants

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
)

// rwFlaw is the one defect of a flawedRW, a read-write lock of expiring
// leases on Redis (a sorted set of the readers and one of the writer, each
// scored by the end of its lease, and one fencing counter). Each
// reproduces a bug reported against a real read-write lock; the comments
// name the report.
type rwFlaw int

const (
	noRWFlaw rwFlaw = iota
	// A reader's renewal extends the lock's key but not the reader's own
	// lease, and reports success: the reader's lease ends at its first
	// TTL while its holder believes it renewed (redisson/redisson issue
	// #1604).
	rwReaderRenewalMissesLease
	// A reader checks that no writer holds the lock in one request and
	// joins the readers in a second one, so a writer granted in between
	// holds the lock together with it (iowarp/clio-core issue #927; the
	// same stale admission as apache/iotdb pull request #11453).
	rwReaderCheckThenJoin
	// A reader's unlock that leaves no reader behind deletes the lock's
	// state, the writer's lease with it, whether or not the reader still
	// held (redisson/redisson issue #4023).
	rwReadUnlockDeletesLock
)

// rwClients is the number of clients the suite runs against the
// read-write mutants.
const rwClients = 4

func init() {
	fixed := rwFactory(noRWFlaw)
	options := claiming()
	options.ReadWrite, options.Clients = true, rwClients
	mutant := func(name string, f rwFlaw, breaks propertytest.Property, bug string) Mutant {
		return Mutant{Name: name, Bug: bug, Breaks: breaks, Factory: rwFactory(f), Fixed: fixed, Options: options}
	}
	register(
		// redisson/redisson issue #1604, "Lock watchdog does not monitor
		// read locks" (Redisson 3.5.4 and 3.7.5, fixed): the watchdog of
		// an RReadWriteLock's read lock extended the lock's hash but not
		// the reader's own "rwlock_timeout" key, which expired under a
		// reader still working, so the reader's unlock failed.
		// The same renewal reports success for a reader whose lease has
		// already ended while another reader keeps the set alive: a
		// renewal granted to an owner that does not hold, which the
		// suite names symmetry when it sees that first (seen under
		// LOCKPROOF_DEEP, seed 8188411075324201416).
		mutant("rw-reader-renewal-misses-its-lease", rwReaderRenewalMissesLease, propertytest.Exclusivity,
			"a reader's renewal extends the key of the readers' set, not the reader's own lease in it, and reports success (Redisson issue #1604): the reader's lease ends at its first TTL while it believes it renewed, and a writer is granted beside it").also(propertytest.Symmetry),
		// iowarp/clio-core issue #927, "ctp::RwLock allows readers to run
		// concurrently with a writer", fixed by pull request #1032: a
		// reader's admission read the lock's mode and then changed it in
		// a second step, and a writer that came in between was granted
		// too. apache/iotdb pull request #11453 fixed the same stale
		// decision in StampedWriterPreferredLock (a woken reader did not
		// look again for a writer).
		mutant("rw-reader-check-then-join", rwReaderCheckThenJoin, propertytest.Exclusivity,
			"a reader checks that no writer holds the lock in one request and joins the readers in a second one (clio-core issue #927), so a writer granted in between holds the lock together with the reader"),
		// redisson/redisson issue #4023, "Error while acquire Lock and
		// ReadLock": a read lock's unlock, finding no other reader,
		// deleted the key under which another thread's lock was held, and
		// that thread's unlock then failed. Here the reader that unlocks
		// is one whose lease ran out while a writer took the lock, the
		// form of the bug the suite's foreign calls reach.
		mutant("rw-read-unlock-deletes-lock", rwReadUnlockDeletesLock, propertytest.Symmetry,
			"a reader's unlock that leaves no reader deletes the writer's lease too, even when the reader no longer held (Redisson issue #4023): a stale reader's Unlock frees a writer's lock").also(propertytest.Exclusivity),
	)
}

// rwFactory is the Factory of a flawedRW with flaw f, on a miniredis in
// manual time; every client has a connection of its own, and its Locker is
// the ReadWriteLocker of the lock's two modes.
func rwFactory(f rwFlaw) propertytest.Factory {
	return backends.OnMiniredis(func(c redis.UniversalClient, name string, opts ...locks.Option) (locks.Locker, error) {
		base, err := newSetNXLocker(c, name, noRedisBug, opts...) // its name and options
		if err != nil {
			return nil, err
		}
		readers, writer, _, fence := redislock.RWKeys(base.opt.Prefix, name)
		rw := &flawedRW{client: c, name: name, keys: []string{readers, writer, fence}, opt: base.opt, flaw: f}
		return propertytest.RWViews(&rwMode{rw: rw, shared: true}, &rwMode{rw: rw}), nil
	})
}

// flawedRW is a read-write lock of expiring leases with one flaw; without
// one it is correct (each step one script on the server's clock, expired
// leases pruned first), though it does not keep readers from starving a
// writer.
type flawedRW struct {
	client redis.UniversalClient
	name   string
	keys   []string // the readers' set, the writer's set, the fencing counter
	opt    locks.Options
	flaw   rwFlaw
}

// rwMode is one mode of a flawedRW, a Locker.
type rwMode struct {
	rw     *flawedRW
	shared bool
}

var _ locks.Locker = (*rwMode)(nil)

// Scripts. ARGV: owner, ttl µs. rwTakeRead and rwTakeWrite grant (the
// token) or refuse (0); rwWriterCount and rwJoinReaders are a read's
// admission split in two.
var (
	rwTakeRead = redis.NewScript(semNow + rwPrune + `if redis.call('ZCARD', KEYS[2]) > 0 then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return redis.call('INCR', KEYS[3])`)
	rwTakeWrite = redis.NewScript(semNow + rwPrune + `if redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2]) > 0 then return 0 end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
return redis.call('INCR', KEYS[3])`)
	rwWriterCount = redis.NewScript(semNow + rwPrune + "return redis.call('ZCARD', KEYS[2])")
	rwJoinReaders = redis.NewScript(semNow + `redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return redis.call('INCR', KEYS[3])`)
	// rwReleaseAll is semReleaseScript that, once no reader is left,
	// deletes the writer's set as well.
	rwReleaseAll = redis.NewScript(semNow + rwPrune + `local n = redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[2]) end
return n`)
	// rwRenewKeyOnly is semRenewScript with the reader's score left as it
	// was: only the set's key gets a fresh TTL.
	rwRenewKeyOnly = redis.NewScript(semNow + semPrune + `if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) / 1000))
return 1`)
)

// rwPrune drops the readers' and the writer's leases that ended by now.
const rwPrune = "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\nredis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)\n"

// TryLock takes a lease in the view's mode; locks.ErrLocked when the lock
// is held in the way.
func (m *rwMode) TryLock(ctx context.Context) (locks.Lease, error) {
	rw := m.rw
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mutants: try lock: %w", err)
	}
	start, owner := rw.opt.Clock.Now(), locks.NewOwner()
	args := []any{owner, rw.opt.TTL.Microseconds()}
	var tok int64
	var err error
	switch {
	case !m.shared:
		tok, err = rwTakeWrite.Run(ctx, rw.client, rw.keys, args...).Int64()
	case rw.flaw == rwReaderCheckThenJoin:
		var writers int64
		if writers, err = rwWriterCount.Run(ctx, rw.client, rw.keys, args...).Int64(); err == nil {
			if writers > 0 {
				return nil, fmt.Errorf("mutants: %w", locks.ErrLocked)
			}
			tok, err = rwJoinReaders.Run(ctx, rw.client, rw.keys, args...).Int64()
		}
	default:
		tok, err = rwTakeRead.Run(ctx, rw.client, rw.keys, args...).Int64()
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("mutants: acquire: %w", err)
	case tok == 0:
		return nil, fmt.Errorf("mutants: %w", locks.ErrLocked)
	}
	set := rw.keys[1]
	if m.shared {
		set = rw.keys[0]
	}
	ops := rwOps{ownerOps: ownerOps{client: rw.client, key: set, owner: owner, ttl: rw.opt.TTL},
		keyOnly: m.shared && rw.flaw == rwReaderRenewalMissesLease}
	if m.shared && rw.flaw == rwReadUnlockDeletesLock {
		ops.all = rw.keys
	}
	return handOver(ctx, locks.NewLease(locks.LeaseSpec{Name: rw.name, Token: locks.Token(tok), Fenced: true, Start: start}, ops, rw.opt), rw.opt)
}

// Lock retries TryLock every TTL/10 of the lock's clock.
func (m *rwMode) Lock(ctx context.Context) (locks.Lease, error) {
	return retryEvery(ctx, m.rw.opt, m.TryLock)
}

// rwOps are one lease's renewal and release on the sorted set of its mode:
// the semaphore's scripts, which act on one set, unless keyOnly.
type rwOps struct {
	ownerOps
	keyOnly bool     // rwReaderRenewalMissesLease: the renewal leaves the lease as it was
	all     []string // rwReadUnlockDeletesLock: the lock's keys, which the release runs on
}

func (o rwOps) Renew(ctx context.Context) error {
	script := semRenewScript
	if o.keyOnly {
		script = rwRenewKeyOnly
	}
	return o.run(ctx, script, "renew", o.owner, o.ttl.Microseconds())
}

func (o rwOps) Release(ctx context.Context) error {
	if o.all != nil {
		return runOn(ctx, o.client, rwReleaseAll, o.all, "release", o.owner)
	}
	return o.run(ctx, semReleaseScript, "release", o.owner)
}
