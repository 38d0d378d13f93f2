package mutants

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
)

func init() {
	// redisson/redisson issue #1104, "RFairLock dead lock issue"
	// (threads whose tryLock gave up left entries in the fair lock's
	// queue, and the lock stayed refused to everyone while nobody held
	// it), and PR #7224, "tryLock method throws a redis timeout
	// exception, and the key redisson_lock_queue and
	// redisson_lock_timeout in redis is not removed" (#5019).
	register(Mutant{Name: "fair-queue-entry-left", Breaks: propertytest.DeadlockFreedom,
		Bug:     "a Redisson-style fair lock whose TryLock, refused, leaves its entry in the lock's wait queue (Redisson issue #1104, PR #7224): once the holder unlocks, the dead entry is first in line and every other client is refused until it times out",
		Factory: fairFactory(false), Fixed: fairFactory(true), Options: claiming(),
		// A refusal of the free lock in a history that also holds an
		// acquire of unknown outcome (a client cut off while waiting) can
		// be explained by that acquire having taken the lock: the lock
		// history alone cannot tell a refusal of a free lock from a grant
		// that a later grant then overlaps, and the suite names the worse.
		// The freed-lock probe names deadlock freedom when nothing is in
		// doubt, as in most runs.
		AlsoBreaks: []propertytest.Property{propertytest.Exclusivity}})
}

// fairFactory is the Factory of fairLockers; leaveQueue makes a refused
// TryLock take its entry out of the queue.
func fairFactory(leaveQueue bool) propertytest.Factory {
	return onSetNX(func(base *setnxLocker) locks.Locker {
		return &fairLocker{setnxLocker: base, leaveQueue: leaveQueue, queue: base.key + ":queue", timeouts: base.key + ":timeout"}
	})
}

// fairLocker is a fair lock in the manner of Redisson's RedissonFairLock:
// the key (SET PX, the owner as value) is granted only to the first
// contender in a wait queue (a list, with each entry's timeout in a
// sorted set); a contender that finds it taken queues itself, and entries
// whose timeout passed are dropped from the head of the queue. The grant
// draws its token from setnxLocker's fencing counter.
type fairLocker struct {
	*setnxLocker
	leaveQueue bool // a refused TryLock removes its entry (the fix)
	queue      string
	timeouts   string
}

var _ locks.Locker = (*fairLocker)(nil)

// The fair lock's scripts. KEYS: the lock, the queue, the timeouts (and
// for fairAcquire the fencing counter). fairAcquire, with ARGV the owner,
// the TTL in ms, now in Unix ms and the entry timeout in ms, returns the
// next token when it granted the lock, else 0 after queueing the owner
// (or refreshing its entry). fairLeave, with
// ARGV the owner, removes its entry.
var (
	fairAcquireScript = redis.NewScript(`
local now = tonumber(ARGV[3])
while true do
  local head = redis.call('LINDEX', KEYS[2], 0)
  if not head then break end
  local t = redis.call('ZSCORE', KEYS[3], head)
  if t and tonumber(t) > now then break end
  redis.call('LPOP', KEYS[2])
  redis.call('ZREM', KEYS[3], head)
end
local head = redis.call('LINDEX', KEYS[2], 0)
if redis.call('EXISTS', KEYS[1]) == 0 and (not head or head == ARGV[1]) then
  if head then
    redis.call('LPOP', KEYS[2])
    redis.call('ZREM', KEYS[3], ARGV[1])
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return redis.call('INCR', KEYS[4])
end
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  redis.call('RPUSH', KEYS[2], ARGV[1])
end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[4]), ARGV[1])
return 0`)
	fairLeaveScript = redis.NewScript(`
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1`)
)

// entryTimeout is how long a queue entry lives without being refreshed:
// a waiter's Lock refreshes it every TTL/10.
func (l *fairLocker) entryTimeout() time.Duration { return l.opt.TTL / 2 }

// TryLock makes one attempt with an owner of its own; refused, it leaves
// the queue again, unless that is the bug.
func (l *fairLocker) TryLock(ctx context.Context) (locks.Lease, error) {
	owner := locks.NewOwner()
	lease, err := l.try(ctx, owner)
	if err != nil && l.leaveQueue {
		l.leave(ctx, owner)
	}
	return lease, err
}

// Lock queues once and keeps its place, asking again every TTL/10 of the
// Locker's clock; if ctx ends first it leaves the queue.
func (l *fairLocker) Lock(ctx context.Context) (locks.Lease, error) {
	owner := locks.NewOwner()
	lease, err := retryEvery(ctx, l.opt, func(ctx context.Context) (locks.Lease, error) { return l.try(ctx, owner) })
	if err != nil {
		l.leave(ctx, owner)
	}
	return lease, err
}

// leave takes owner's entry out of the queue, even once ctx ended.
func (l *fairLocker) leave(ctx context.Context, owner string) {
	_ = fairLeaveScript.Run(context.WithoutCancel(ctx), l.client, []string{l.key, l.queue, l.timeouts}, owner).Err()
}

// try runs the acquire script for owner.
func (l *fairLocker) try(ctx context.Context, owner string) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mutants: try lock: %w", err)
	}
	start := l.opt.Clock.Now()
	n, err := fairAcquireScript.Run(ctx, l.client, []string{l.key, l.queue, l.timeouts, l.fenceKey},
		owner, l.opt.TTL.Milliseconds(), start.UnixMilli(), l.entryTimeout().Milliseconds()).Int64()
	switch {
	case err != nil:
		return nil, fmt.Errorf("mutants: acquire: %w", err)
	case n == 0:
		return nil, fmt.Errorf("mutants: queued: %w", locks.ErrLocked)
	}
	spec := locks.LeaseSpec{Name: l.name, Token: locks.Token(n), Fenced: true, Start: start}
	return handOver(ctx, locks.NewLease(spec, l.ops(owner), l.opt), l.opt)
}
