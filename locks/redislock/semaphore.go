package redislock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
)

// Semaphore is a counting semaphore of a fixed number of permits on one
// Redis server: at most that many leases are held at once. Each permit is a
// lease as a Locker's is (TTL, watchdog renewal, Done and Err, max hold),
// with a fencing token that strictly increases across all the
// semaphore's grants. It implements locks.Locker: Lock and TryLock take
// one permit, the lease's Unlock gives it back.
//
// Storage, under one hash tag: <prefix>{<name>}:sem is a sorted set of the
// permits' owners, each scored by the instant its lease ends on the
// server's clock (TIME, in microseconds); <prefix>{<name>}:sem:queue is
// the FIFO of the waiters; <prefix>{<name>}:sem:fence is the fencing
// counter. Every operation is one Lua script that first drops the permits
// whose score has passed, so an expired permit is never counted and never
// renewed. The sorted set's own TTL follows its longest permit.
//
// Waiting is queued, as a Locker's is: a waiter joins the queue, and a
// release (or any script that finds permits freed by expiry) hands each
// free permit straight to the waiter at the head of the queue that is
// still listening, publishing its fencing token on the channel of that
// waiter's Semaphore (<prefix>{<name>}:sem:w:<id>), so that one release
// wakes one waiter. A waiter also looks again once the earliest permit's
// TTL (plus jitter) has passed, which covers holders that crash without
// unlocking. Waiters are served in arrival order; a TryLock takes a free
// permit only when nobody waits for it.
//
// Every Semaphore of one name must be made with the same number of
// permits: each counts against its own.
type Semaphore struct {
	client  redis.UniversalClient
	name    string
	permits int
	opt     locks.Options
	reentry *locks.Reentry
	keys    []string // the permits' sorted set, the queue, the fence
	chPfx   string   // + a Semaphore's id is its waiters' channel
	acq     *scripted
}

var _ locks.Locker = (*Semaphore)(nil)

// NewSemaphore returns the semaphore called name, of permits permits (at
// least 1), on the Redis server behind client. It takes the options New
// takes, with the same defaults; locks.WithOwner makes a later Lock or
// TryLock of the same owner through this Semaphore return a hold on the
// permit it holds (see locks.WithOwner) rather than a second permit.
func NewSemaphore(client redis.UniversalClient, name string, permits int, opts ...locks.Option) (*Semaphore, error) {
	o, err := resolve(client, name, opts)
	if err != nil {
		return nil, err
	}
	if permits < 1 {
		return nil, fmt.Errorf("redislock: %w: %d permits (at least 1)", locks.ErrInvalidOption, permits)
	}
	key := Key(o.Prefix, name) + ":sem"
	s := &Semaphore{
		client:  client,
		name:    name,
		permits: permits,
		opt:     o,
		reentry: locks.NewReentry(o),
		keys:    []string{key, key + ":queue", key + ":fence"},
		chPfx:   key + ":w:",
	}
	s.acq = newScripted(client, name, s.chPfx, o, s.errorf)
	s.acq.queue = s.keys[1]
	s.acq.busy = fmt.Sprintf(" (all %d permits held)", permits)
	s.acq.script = func(owner string, waiting bool) (*redis.Script, []string, []any) {
		return acquireSemScript, s.keys, append(s.args(owner, s.acq.member(owner)), waitArg(waiting))
	}
	s.acq.ops = func(owner string) locks.LeaseOps { return semOps{s: s, owner: owner} }
	s.acq.withdraw = func(ctx context.Context, owner string) error {
		_, err := s.release(ctx, owner, s.acq.member(owner))
		return err
	}
	return s, nil
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits returns the number of permits.
func (s *Semaphore) Permits() int { return s.permits }

// Key returns the Redis key of the permits' sorted set; the waiters' queue
// and the fencing counter are the same key with ":queue" and ":fence"
// appended.
func (s *Semaphore) Key() string { return s.keys[0] }

// TryLock takes a permit if one is free; it returns locks.ErrLocked
// (wrapped) when all are held.
func (s *Semaphore) TryLock(ctx context.Context) (locks.Lease, error) {
	return s.reentry.Acquire(ctx, true, s.acq.tryLock)
}

// Lock waits until a permit is held, ctx ends (an error wrapping
// ctx.Err()) or the wait budget runs out (locks.ErrWaitBudget). See
// Semaphore for how it waits.
func (s *Semaphore) Lock(ctx context.Context) (locks.Lease, error) {
	return s.reentry.Acquire(ctx, false, s.acq.lock)
}

// attempt runs acquireSemScript for owner (see scripted.attempt).
func (s *Semaphore) attempt(ctx context.Context, owner string) (attemptResult, error) {
	return s.acq.attempt(ctx, owner, false)
}

// args are the arguments every semaphore script begins with.
func (s *Semaphore) args(owner, member string) []any {
	return []any{owner, s.opt.TTL.Microseconds(), s.chPfx, member, s.permits}
}

// waitArg is a script's "waiting" argument.
func waitArg(waiting bool) string {
	if waiting {
		return "1"
	}
	return "0"
}

// release runs releaseSemScript, first taking member (when not "") out of
// the queue: 1 if owner held a permit, 0 if not.
func (s *Semaphore) release(ctx context.Context, owner, member string) (int64, error) {
	n, err := releaseSemScript.Run(ctx, s.client, s.keys, s.args(owner, member)...).Int64()
	if err != nil {
		return 0, s.errorf("release: %w", err)
	}
	return n, nil
}

func (s *Semaphore) errorf(format string, args ...any) error {
	return fmt.Errorf("redislock semaphore %q: "+format, append([]any{s.name}, args...)...)
}

// semOps are the owner-checked operations on one permit.
type semOps struct {
	s     *Semaphore
	owner string
}

func (o semOps) Renew(ctx context.Context) error {
	n, err := renewSemScript.Run(ctx, o.s.client, o.s.keys, o.s.args(o.owner, "")...).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("redislock: %w", locks.ErrNotHeld)
	}
	return nil
}

func (o semOps) Release(ctx context.Context) error {
	n, err := o.s.release(ctx, o.owner, "")
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("redislock: %w", locks.ErrNotHeld)
	}
	return nil
}
