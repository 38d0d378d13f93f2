package redislock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/locks"
)

// DefaultPrefix is the key prefix used unless locks.WithPrefix says otherwise.
const DefaultPrefix = "lockproof:"

// Key returns the Redis key that holds lock name under prefix (the resolved
// locks.WithPrefix, DefaultPrefix by default): the prefix and the name in
// braces, "lockproof:{orders}". The braces are a Redis Cluster hash tag, so
// the fencing counter and the waiters' queue, the same key with ":fence"
// and ":queue" appended, share its slot. A Locker's Key method returns it.
func Key(prefix, name string) string { return layout.RedisKey(prefix, name) }

// Locker is one named lock on one Redis server. It is safe for concurrent
// use: goroutines of one process share a Locker, and with it one pub/sub
// subscription while any of them waits.
type Locker struct {
	client  redis.UniversalClient
	name    string
	opt     locks.Options
	reentry *locks.Reentry // nil without locks.WithOwner
	id      string         // this Locker's identity in the queue and its channel
	keys    []string
	chPfx   string // channel prefix; + id is this Locker's channel
	*line          // the waiters, on this Locker's channel
}

var _ locks.Locker = (*Locker)(nil)

// resolve checks the arguments every constructor of the package takes and
// resolves the options.
func resolve(client redis.UniversalClient, name string, opts []locks.Option) (locks.Options, error) {
	if client == nil {
		return locks.Options{}, fmt.Errorf("redislock: %w", locks.ErrNilClient)
	}
	if err := locks.ValidateName(name); err != nil {
		return locks.Options{}, fmt.Errorf("redislock: %w", err)
	}
	o, err := locks.Resolve(DefaultPrefix, opts...)
	if err != nil {
		return locks.Options{}, fmt.Errorf("redislock: %w", err)
	}
	return o, nil
}

// New returns the lock called name on the Redis server behind client.
// Options: locks.WithTTL, WithWatchdog, WithWaitBudget, WithRequestTimeout
// (bounds the clean-up a waiter sends when it gives up; the caller's requests
// are bounded by their ctx), WithPrefix (default DefaultPrefix), WithClock,
// WithLogger, WithObserver, WithMaxHold,
// WithOwner (re-entry by the same owner through this Locker; another Locker
// with the same owner id contends as any other owner: see locks.WithOwner).
func New(client redis.UniversalClient, name string, opts ...locks.Option) (*Locker, error) {
	o, err := resolve(client, name, opts)
	if err != nil {
		return nil, err
	}
	key := Key(o.Prefix, name)
	l := &Locker{
		client:  client,
		name:    name,
		opt:     o,
		reentry: locks.NewReentry(o),
		id:      locks.NewOwner()[:16],
		keys:    []string{key, key + ":fence", key + ":queue"},
		chPfx:   key + ":w:",
	}
	l.line = newLine(client, name, l.chPfx+l.id, o, l.errorf)
	l.line.try, l.line.enqueue, l.line.recheck, l.line.take = l.try, l.enqueue, l.recheck, l.grant
	l.line.renew = func(ctx context.Context, owner string) error { return leaseOps{l: l, owner: owner}.Renew(ctx) }
	l.line.withdraw = func(ctx context.Context, owner string) error {
		_, err := l.release(ctx, owner, l.member(owner))
		return err
	}
	return l, nil
}

// newLine returns a line of no steps whose waiters listen on channel.
func newLine(client redis.UniversalClient, name, channel string, o locks.Options, errorf func(string, ...any) error) *line {
	q := &line{name: name, opt: o, errorf: errorf, waiters: map[string]chan locks.Token{}}
	q.listen = &listener{client: client, channel: channel, timeout: o.TTL, route: q.route, missed: q.recheckAll}
	return q
}

// Name returns the lock's name.
func (l *Locker) Name() string { return l.name }

// Key returns the Redis key that holds the lock; the fencing counter and the
// waiters' queue are the same key with ":fence" and ":queue" appended.
func (l *Locker) Key() string { return l.keys[0] }

// Lock waits until the lock is held, ctx ends (an error wrapping ctx.Err())
// or the wait budget runs out (locks.ErrWaitBudget).
//
// Waiting is notified, not polled: a waiter queues itself in Redis and the
// holder's unlock hands the lock straight to the first waiter still
// listening, publishing the new fencing token on that waiter's channel. A
// waiter also re-checks once the holder's remaining TTL (plus jitter) has
// passed, which covers holders that crash without unlocking.
func (l *Locker) Lock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, false, l.line.lock)
}

// TryLock makes one attempt; it returns locks.ErrLocked when the lock is held.
func (l *Locker) TryLock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, true, l.tryLock)
}

// tryLock is TryLock without re-entry (see locks.WithOwner).
func (l *Locker) tryLock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, l.errorf("try lock: %w", err)
	}
	owner := locks.NewOwner()
	r, err := l.try(ctx, owner)
	if err != nil {
		return nil, err
	}
	if r.status == statusWait {
		return nil, l.errorf("%w", locks.ErrLocked)
	}
	return l.grant(ctx, owner, r.fence, r.start)
}

// attemptResult is what one run of acquireScript said.
type attemptResult struct {
	status int
	fence  locks.Token
	pttl   time.Duration // holder's remaining TTL when status is statusWait; < 0 unknown
	start  time.Time     // when the request was sent
}

const (
	statusWait    = 0 // someone else holds it
	statusTaken   = 1 // taken now
	statusHandoff = 2 // already handed to us
)

func (l *Locker) member(owner string) string {
	return owner + " " + l.id + " " + strconv.FormatInt(l.opt.TTL.Milliseconds(), 10)
}

// try is a first attempt, one round trip: SET NX PX and INCR of the fence,
// pipelined. The INCR runs whether or not the SET won, and need not be atomic
// with it:
//   - a lost attempt only leaves a gap in the tokens;
//   - while the key is ours no other grant can happen, so an INCR that
//     follows a won SET is above every earlier grant's token;
//   - should the key expire between the two (a server stalled for a whole
//     TTL), the TTL counted from r.start has run out before the reply
//     arrives, so grant turns the attempt into locks.ErrLeaseExpired and
//     the token is never used.
//
// Tokens therefore increase strictly from one grant to the next.
func (l *Locker) try(ctx context.Context, owner string) (attemptResult, error) {
	r := attemptResult{start: l.opt.Clock.Now(), pttl: -1}
	var set *redis.BoolCmd
	var fence *redis.IntCmd
	_, err := l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		set = p.SetNX(ctx, l.keys[0], owner, l.opt.TTL)
		fence = p.Incr(ctx, l.keys[1])
		return nil
	})
	if err != nil {
		return r, l.errorf("acquire: %w", err)
	}
	if !set.Val() {
		r.status = statusWait
		return r, nil
	}
	r.status, r.fence = statusTaken, locks.Token(fence.Val())
	return r, nil
}

// enqueue puts owner at the back of the queue with one RPUSH. A waiter
// behind others needs nothing more: the lock is held, or being handed along
// the queue, and the re-check after its timer covers the rare cases where it
// is neither (a holder or hand-over target that crashed; its key expires).
// The first waiter instead re-checks at once, since nobody may hold the lock
// at all; that also sets the queue's TTL.
func (l *Locker) enqueue(ctx context.Context, owner string) (attemptResult, error) {
	r := attemptResult{start: l.opt.Clock.Now(), pttl: -1}
	n, err := l.client.RPush(ctx, l.keys[2], l.member(owner)).Result()
	if err != nil {
		return r, l.errorf("enqueue: %w", err)
	}
	if n == 1 {
		return l.recheck(ctx, owner)
	}
	r.status = statusWait
	return r, nil
}

// recheck runs recheckScript for owner.
func (l *Locker) recheck(ctx context.Context, owner string) (attemptResult, error) {
	r := attemptResult{start: l.opt.Clock.Now(), pttl: -1}
	ttl := l.opt.TTL.Milliseconds()
	v, err := recheckScript.Run(ctx, l.client, l.keys, owner, ttl, l.member(owner), 3*ttl).Int64Slice()
	if err != nil {
		return r, l.errorf("acquire: %w", err)
	}
	if len(v) < 2 {
		return r, l.errorf("acquire: unexpected reply %v", v)
	}
	r.status = int(v[0])
	switch r.status {
	case statusTaken:
		r.fence = locks.Token(v[1])
	case statusHandoff:
		r.fence = locks.Token(v[1])
		if len(v) > 2 && v[2] > 0 {
			// The hand-over happened before this request; the key has
			// v[2] ms left from when the server ran it, which is after
			// r.start, so counting them from r.start stays conservative.
			r.start = r.start.Add(time.Duration(v[2])*time.Millisecond - l.opt.TTL)
		}
	case statusWait:
		if v[1] >= 0 {
			r.pttl = time.Duration(v[1]) * time.Millisecond
		}
	default:
		return r, l.errorf("acquire: unexpected status %d", r.status)
	}
	return r, nil
}

// grant wraps an acquisition in a managed lease and reports it to the
// observer. An acquisition whose validity had already run out by the time
// the answer arrived (the client paused longer than the TTL) is released and
// reported as locks.ErrLeaseExpired, never returned as held.
func (l *Locker) grant(ctx context.Context, owner string, fence locks.Token, start time.Time) (locks.Lease, error) {
	lease := locks.NewLease(locks.LeaseSpec{Name: l.name, Token: fence, Fenced: true, Start: start},
		leaseOps{l: l, owner: owner}, l.opt)
	if err := lease.GiveBackIfLate(ctx); err != nil { // the release passes the lock on
		return nil, l.errorf("acquired too late: %w", err)
	}
	locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: l.name, Token: fence, Fenced: true})
	return lease, nil
}

// release runs releaseScript for owner, first removing member from the queue
// when it is not empty.
func (l *Locker) release(ctx context.Context, owner, member string) (int64, error) {
	n, err := releaseScript.Run(ctx, l.client, l.keys, owner, l.chPfx, member).Int64()
	if err != nil {
		return 0, l.errorf("release: %w", err)
	}
	return n, nil
}

func (l *Locker) errorf(format string, args ...any) error {
	return fmt.Errorf("redislock %q: "+format, append([]any{l.name}, args...)...)
}

// leaseOps are the owner-checked operations on one acquisition.
type leaseOps struct {
	l     *Locker
	owner string
}

func (o leaseOps) Renew(ctx context.Context) error {
	n, err := renewScript.Run(ctx, o.l.client, o.l.keys[:1], o.owner, o.l.opt.TTL.Milliseconds()).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("redislock: %w", locks.ErrNotHeld)
	}
	return nil
}

func (o leaseOps) Release(ctx context.Context) error {
	n, err := o.l.release(ctx, o.owner, "")
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("redislock: %w", locks.ErrNotHeld)
	}
	return nil
}
