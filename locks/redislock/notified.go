package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
)

// scripted is the acquisition the Semaphore and each mode of the RWMutex
// share: one script per attempt, which hands the free room to the waiters
// at the head of the queue, then grants the caller (with a fencing token),
// or refuses it with the time until the earliest lease in the way ends,
// queueing it when it waits. Waiting is the line's: a release hands the
// room it freed to the waiters it serves, and wakes them alone.
type scripted struct {
	*line
	id string // the line's identity in the queue and its channel
	// suffix ends the line's queue members, after "<owner> <id> <ttl µs>".
	suffix string
	// queue is the key of the waiters' queue.
	queue string
	// busy follows locks.ErrLocked in a refused TryLock's error.
	busy string
	// script is the acquire script for owner, its keys and arguments: it
	// answers {1, fence} when granted, {0, µs until the earliest lease in
	// the way ends} when not. waiting is set in Lock, not in TryLock: it
	// queues a refused owner, and keeps a queued one in its place.
	script func(owner string, waiting bool) (*redis.Script, []string, []any)
	client redis.UniversalClient
	// loaded: an EVAL of script went through, so the server has it.
	loaded atomic.Bool
	// ops are the owner-checked operations on owner's lease.
	ops func(owner string) locks.LeaseOps
}

// newScripted returns a scripted whose waiters listen on chPfx and its
// id; the caller sets script, ops and the line's withdraw.
func newScripted(client redis.UniversalClient, name, chPfx string, o locks.Options, errorf func(string, ...any) error) *scripted {
	id := locks.NewOwner()[:16]
	n := &scripted{id: id, client: client, line: newLine(client, name, chPfx+id, o, errorf)}
	n.line.try = func(ctx context.Context, owner string) (attemptResult, error) { return n.attempt(ctx, owner, false) }
	n.line.enqueue = n.enqueue
	n.line.recheck = func(ctx context.Context, owner string) (attemptResult, error) { return n.attempt(ctx, owner, true) }
	n.line.take = n.grant
	n.line.renew = func(ctx context.Context, owner string) error { return n.ops(owner).Renew(ctx) }
	return n
}

// enqueue puts owner at the back of the queue with one RPUSH, as a
// Locker's waiter does. A waiter behind others needs nothing more: the
// waiters ahead were refused because the leases in the way are held, and
// the script that frees room serves the queue in order; when room is
// freed by an expiry instead, the re-checks after the waiters' timers
// serve it. The first waiter instead attempts at once, since the room may
// be free; that also sets the queue's TTL.
func (n *scripted) enqueue(ctx context.Context, owner string) (attemptResult, error) {
	r := attemptResult{start: n.opt.Clock.Now(), pttl: -1, status: statusWait}
	k, err := n.client.RPush(ctx, n.queue, n.member(owner)).Result()
	if err != nil {
		return r, n.errorf("enqueue: %w", err)
	}
	if k == 1 {
		return n.attempt(ctx, owner, true)
	}
	return r, nil
}

// member is owner's entry in the queue.
func (n *scripted) member(owner string) string {
	return owner + " " + n.id + " " + strconv.FormatInt(n.opt.TTL.Microseconds(), 10) + n.suffix
}

func (n *scripted) tryLock(ctx context.Context) (locks.Lease, error) {
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
	return n.grant(ctx, owner, r.fence, r.start)
}

// attempt runs the script for owner. A request that fails (a cancelled
// ctx, a lost reply) may still have granted a lease: it is released,
// owner-checked, on a context of its own.
func (n *scripted) attempt(ctx context.Context, owner string, waiting bool) (attemptResult, error) {
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
func (n *scripted) eval(ctx context.Context, script *redis.Script, keys []string, args []any, start *time.Time) *redis.Cmd {
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
func (n *scripted) grant(ctx context.Context, owner string, fence locks.Token, start time.Time) (locks.Lease, error) {
	lease := locks.NewLease(locks.LeaseSpec{Name: n.name, Token: fence, Fenced: true, Start: start},
		n.ops(owner), n.opt)
	if err := lease.GiveBackIfLate(ctx); err != nil {
		return nil, n.errorf("acquired too late: %w", err)
	}
	locks.Observe(ctx, n.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: n.name, Token: fence, Fenced: true})
	return lease, nil
}
