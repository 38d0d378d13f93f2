package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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
// server's clock (TIME, in microseconds); <prefix>{<name>}:sem:fence is the
// fencing counter. Every operation is one Lua script that first drops the
// permits whose score has passed, so an expired permit is never counted
// and never renewed. The sorted set's own TTL follows its longest permit.
//
// Waiting is notified: a release publishes on <prefix>{<name>}:sem:free,
// and every goroutine waiting through any Semaphore of that name tries
// again (one wins each freed permit; the others wait on). A waiter also
// tries again once the earliest permit's TTL (plus jitter) has passed,
// which covers holders that crash without unlocking. Waiters are not
// served in arrival order.
//
// Every Semaphore of one name must be made with the same number of
// permits: each counts against its own.
type Semaphore struct {
	client  redis.UniversalClient
	name    string
	permits int
	opt     locks.Options
	reentry *locks.Reentry
	keys    []string // the permits' sorted set, the fence
	channel string

	mu      sync.Mutex
	waiters map[chan struct{}]bool
	listen  *listener
}

var _ locks.Locker = (*Semaphore)(nil)

// NewSemaphore returns the semaphore called name, of permits permits (at
// least 1), on the Redis server behind client. It takes the options New
// takes, with the same defaults; locks.WithOwner makes a later Lock or
// TryLock of the same owner through this Semaphore return a hold on the
// permit it holds (see locks.WithOwner) rather than a second permit.
func NewSemaphore(client redis.UniversalClient, name string, permits int, opts ...locks.Option) (*Semaphore, error) {
	if client == nil {
		return nil, fmt.Errorf("redislock: %w", locks.ErrNilClient)
	}
	if err := locks.ValidateName(name); err != nil {
		return nil, fmt.Errorf("redislock: %w", err)
	}
	if permits < 1 {
		return nil, fmt.Errorf("redislock: %w: %d permits (at least 1)", locks.ErrInvalidOption, permits)
	}
	o, err := locks.Resolve(DefaultPrefix, opts...)
	if err != nil {
		return nil, fmt.Errorf("redislock: %w", err)
	}
	key := Key(o.Prefix, name) + ":sem"
	s := &Semaphore{
		client:  client,
		name:    name,
		permits: permits,
		opt:     o,
		reentry: locks.NewReentry(o),
		keys:    []string{key, key + ":fence"},
		channel: key + ":free",
		waiters: map[chan struct{}]bool{},
	}
	s.listen = &listener{client: client, channel: s.channel, timeout: o.TTL, route: func(string) { s.wakeAll() }, missed: s.wakeAll}
	return s, nil
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits returns the number of permits.
func (s *Semaphore) Permits() int { return s.permits }

// Key returns the Redis key of the permits' sorted set; the fencing counter
// is the same key with ":fence" appended.
func (s *Semaphore) Key() string { return s.keys[0] }

// TryLock takes a permit if one is free; it returns locks.ErrLocked
// (wrapped) when all are held.
func (s *Semaphore) TryLock(ctx context.Context) (locks.Lease, error) {
	return s.reentry.Acquire(ctx, true, s.tryLock)
}

func (s *Semaphore) tryLock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, s.errorf("try lock: %w", err)
	}
	owner := locks.NewOwner()
	r, err := s.attempt(ctx, owner)
	if err != nil {
		return nil, err
	}
	if r.status == statusWait {
		return nil, s.errorf("%w (all %d permits held)", locks.ErrLocked, s.permits)
	}
	return s.grant(ctx, owner, r)
}

// Lock waits until a permit is held, ctx ends (an error wrapping
// ctx.Err()) or the wait budget runs out (locks.ErrWaitBudget). See
// Semaphore for how it waits.
func (s *Semaphore) Lock(ctx context.Context) (locks.Lease, error) {
	return s.reentry.Acquire(ctx, false, s.lock)
}

func (s *Semaphore) lock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, s.errorf("lock: %w", err)
	}
	owner := locks.NewOwner()
	began := s.opt.Clock.Now()
	var ch chan struct{}
	defer func() {
		if ch != nil {
			s.leave(ch)
		}
	}()
	for {
		r, err := s.attempt(ctx, owner)
		if err != nil {
			return nil, err
		}
		if r.status != statusWait {
			lease, err := s.grant(ctx, owner, r)
			if !errors.Is(err, locks.ErrLeaseExpired) {
				return lease, err
			}
			owner = locks.NewOwner() // granted too late to use, and released: try again
			continue
		}
		if ch == nil {
			// Subscribe, then try again before sleeping: a release
			// between the first attempt and the subscription was not
			// heard.
			if ch, err = s.join(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if _, _, err := sleepOn(ctx, s.opt, s.errorf, ch, r.pttl, began); err != nil {
			return nil, err
		}
	}
}

// attempt runs acquireSemScript for owner. A request that fails (a
// cancelled ctx, a lost reply) may still have taken a permit: it is
// released, owner-checked, on a context of its own.
func (s *Semaphore) attempt(ctx context.Context, owner string) (attemptResult, error) {
	r := attemptResult{start: s.opt.Clock.Now(), pttl: -1}
	v, err := acquireSemScript.Run(ctx, s.client, s.keys, owner, s.opt.TTL.Microseconds(), s.permits).Int64Slice()
	if err == nil && len(v) < 2 {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	if err != nil {
		rctx, cancel := locks.RequestContext(context.WithoutCancel(ctx), s.opt.RequestTimeout)
		defer cancel()
		if _, rerr := s.release(rctx, owner); rerr != nil {
			s.opt.Logger.Warn("lockproof: could not release a permit whose grant went unanswered; it expires by TTL",
				"lock", s.name, "err", rerr)
		}
		return r, s.errorf("acquire: %w", err)
	}
	r.status = int(v[0])
	if r.status == statusWait {
		r.pttl = time.Duration(v[1]) * time.Microsecond
		return r, nil
	}
	r.fence = locks.Token(v[1])
	return r, nil
}

// grant wraps a permit in a managed lease; one whose validity had already
// run out when the answer came is released and reported as
// locks.ErrLeaseExpired.
func (s *Semaphore) grant(ctx context.Context, owner string, r attemptResult) (locks.Lease, error) {
	lease := locks.NewLease(locks.LeaseSpec{Name: s.name, Token: r.fence, Fenced: true, Start: r.start},
		semOps{s: s, owner: owner}, s.opt)
	if err := lease.Err(); err != nil {
		_ = lease.Unlock(context.WithoutCancel(ctx)) // owner-checked
		return nil, s.errorf("acquired too late: %w", err)
	}
	locks.Observe(ctx, s.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: s.name, Token: r.fence, Fenced: true})
	return lease, nil
}

// release runs releaseSemScript: 1 if owner held a permit, 0 if not.
func (s *Semaphore) release(ctx context.Context, owner string) (int64, error) {
	n, err := releaseSemScript.Run(ctx, s.client, s.keys[:1], owner, s.channel).Int64()
	if err != nil {
		return 0, s.errorf("release: %w", err)
	}
	return n, nil
}

// join registers a waiter and returns the channel it is woken on, once
// the subscription is confirmed.
func (s *Semaphore) join(ctx context.Context) (chan struct{}, error) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.waiters[ch] = true
	s.mu.Unlock()
	if err := s.listen.join(ctx); err != nil {
		s.mu.Lock()
		delete(s.waiters, ch)
		s.mu.Unlock()
		if ctx.Err() != nil {
			return nil, s.errorf("lock: %w", err)
		}
		return nil, s.errorf("subscribe: %w", err)
	}
	return ch, nil
}

func (s *Semaphore) leave(ch chan struct{}) {
	s.mu.Lock()
	delete(s.waiters, ch)
	s.mu.Unlock()
	s.listen.leave()
}

// wakeAll wakes every waiting goroutine to try again.
func (s *Semaphore) wakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
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
	n, err := renewSemScript.Run(ctx, o.s.client, o.s.keys[:1], o.owner, o.s.opt.TTL.Microseconds()).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("redislock: %w", locks.ErrNotHeld)
	}
	return nil
}

func (o semOps) Release(ctx context.Context) error {
	n, err := o.s.release(ctx, o.owner)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("redislock: %w", locks.ErrNotHeld)
	}
	return nil
}
