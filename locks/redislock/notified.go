package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
)

// notified is the acquisition the Semaphore and the RWMutex share: one
// script per attempt, which either grants (with a fencing token) or says
// how long until the earliest lease in the way ends; waiters sleep until
// any message on one pub/sub channel, or that long (plus jitter), and try
// again. Waiters are not served in arrival order.
type notified struct {
	name   string
	opt    locks.Options
	errorf func(string, ...any) error
	// busy follows locks.ErrLocked in a refused TryLock's error.
	busy string
	// script is the acquire script for owner, its keys and arguments: it
	// answers {1, fence} when granted, {0, µs until the earliest lease in
	// the way ends} when not. waiting is set in Lock, not in TryLock.
	script func(owner string, waiting bool) (*redis.Script, []string, []any)
	client redis.Scripter
	// loaded: an EVAL of script went through, so the server has it.
	loaded atomic.Bool
	// ops are the owner-checked operations on owner's lease.
	ops func(owner string) locks.LeaseOps
	// abandon, if set, undoes what a waiting attempt of owner left on the
	// server, when Lock gives up.
	abandon func(ctx context.Context, owner string) error

	mu      sync.Mutex
	waiters map[chan struct{}]bool
	listen  *listener
}

// newNotified returns a notified whose waiters listen on channel; the
// caller sets script, ops and abandon.
func newNotified(client redis.UniversalClient, name, channel string, o locks.Options, errorf func(string, ...any) error) *notified {
	n := &notified{name: name, opt: o, errorf: errorf, client: client, waiters: map[chan struct{}]bool{}}
	n.listen = &listener{client: client, channel: channel, timeout: o.TTL, route: func(string) { n.wakeAll() }, missed: n.wakeAll}
	return n
}

func (n *notified) tryLock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, n.errorf("try lock: %w", err)
	}
	owner := locks.NewOwner()
	r, err := n.attempt(ctx, owner, false)
	if err != nil {
		return nil, err
	}
	if r.status == statusWait {
		return nil, n.errorf("%w%s", locks.ErrLocked, n.busy)
	}
	return n.grant(ctx, owner, r)
}

func (n *notified) lock(ctx context.Context) (lease locks.Lease, err error) {
	if err := ctx.Err(); err != nil {
		return nil, n.errorf("lock: %w", err)
	}
	owner := locks.NewOwner()
	began := n.opt.Clock.Now()
	var ch chan struct{}
	defer func() {
		if ch != nil {
			n.leave(ch)
		}
		if err != nil && n.abandon != nil {
			n.giveUp(owner)
		}
	}()
	for {
		r, err := n.attempt(ctx, owner, true)
		if err != nil {
			return nil, err
		}
		if r.status != statusWait {
			lease, err := n.grant(ctx, owner, r)
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
			if ch, err = n.join(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if _, _, err := sleepOn(ctx, n.opt, n.errorf, ch, r.pttl, began); err != nil {
			return nil, err
		}
	}
}

// giveUp runs abandon for owner on a context of its own.
func (n *notified) giveUp(owner string) {
	ctx, cancel := locks.RequestContext(context.Background(), n.opt.RequestTimeout)
	defer cancel()
	if err := n.abandon(ctx, owner); err != nil {
		n.opt.Logger.Warn("lockproof: could not withdraw a waiter; it expires by TTL", "lock", n.name, "err", err)
	}
}

// attempt runs the script for owner. A request that fails (a cancelled
// ctx, a lost reply) may still have granted a lease: it is released,
// owner-checked, on a context of its own.
func (n *notified) attempt(ctx context.Context, owner string, waiting bool) (attemptResult, error) {
	r := attemptResult{start: n.opt.Clock.Now(), pttl: -1}
	script, keys, args := n.script(owner, waiting)
	v, err := n.eval(ctx, script, keys, args, &r.start).Int64Slice()
	if err == nil && len(v) < 2 {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	if err != nil {
		rctx, cancel := locks.RequestContext(context.WithoutCancel(ctx), n.opt.RequestTimeout)
		defer cancel()
		if rerr := n.ops(owner).Release(rctx); rerr != nil && !errors.Is(rerr, locks.ErrNotHeld) {
			n.opt.Logger.Warn("lockproof: could not release a lease whose grant went unanswered; it expires by TTL",
				"lock", n.name, "err", rerr)
		}
		return r, n.errorf("acquire: %w", err)
	}
	r.status = int(v[0])
	if r.status == statusWait {
		r.pttl = time.Duration(v[1]) * time.Microsecond
		return r, nil
	}
	r.fence = locks.Token(v[1])
	return r, nil
}

// eval runs script so that the request that grants is the first one
// sent: an EVAL until one went through, then EVALSHA, and EVAL again
// when the server lost the script (a restart, SCRIPT FLUSH), with *start
// moved to when that second request was sent, which a lease it granted
// began after. (Script.Run's EVALSHA first would put a NOSCRIPT round
// trip before the grant, and the lease's local deadline, reckoned from
// before it, would fall short of the server's by as long as that took.)
func (n *notified) eval(ctx context.Context, script *redis.Script, keys []string, args []any, start *time.Time) *redis.Cmd {
	if !n.loaded.Load() {
		cmd := script.Eval(ctx, n.client, keys, args...)
		if cmd.Err() == nil {
			n.loaded.Store(true)
		}
		return cmd
	}
	cmd := script.EvalSha(ctx, n.client, keys, args...)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		*start = n.opt.Clock.Now()
		return script.Eval(ctx, n.client, keys, args...)
	}
	return cmd
}

// grant wraps a granted lease in a managed one; one whose validity had
// already run out when the answer came is released and reported as
// locks.ErrLeaseExpired.
func (n *notified) grant(ctx context.Context, owner string, r attemptResult) (locks.Lease, error) {
	lease := locks.NewLease(locks.LeaseSpec{Name: n.name, Token: r.fence, Fenced: true, Start: r.start},
		n.ops(owner), n.opt)
	if err := lease.GiveBackIfLate(ctx); err != nil {
		return nil, n.errorf("acquired too late: %w", err)
	}
	locks.Observe(ctx, n.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: n.name, Token: r.fence, Fenced: true})
	return lease, nil
}

// join registers a waiter and returns the channel it is woken on, once
// the subscription is confirmed.
func (n *notified) join(ctx context.Context) (chan struct{}, error) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	n.waiters[ch] = true
	n.mu.Unlock()
	if err := n.listen.join(ctx); err != nil {
		n.mu.Lock()
		delete(n.waiters, ch)
		n.mu.Unlock()
		if ctx.Err() != nil {
			return nil, n.errorf("lock: %w", err)
		}
		return nil, n.errorf("subscribe: %w", err)
	}
	return ch, nil
}

func (n *notified) leave(ch chan struct{}) {
	n.mu.Lock()
	delete(n.waiters, ch)
	n.mu.Unlock()
	n.listen.leave()
}

// wakeAll wakes every waiting goroutine to try again.
func (n *notified) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
