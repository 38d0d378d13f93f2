package consullock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/locks"
)

// DefaultSemaphorePrefix is the KV prefix of semaphore keys unless
// locks.WithPrefix says otherwise: apart from the mutexes', so that a
// semaphore and a mutex of one name never share keys.
const DefaultSemaphorePrefix = "lockproof-semaphore/"

// PermitKey returns the Consul KV key of permit i (0 to permits-1) of the
// semaphore name under prefix: Key(prefix, name) + "/.permit/" + i. A
// permit is held by the session that acquired its key.
func PermitKey(prefix, name string, i int) string {
	return layout.ConsulPermit(Key(prefix, name), i)
}

// Semaphore is a counting semaphore on Consul: permits keys, each a lock
// as the mutex's key is, taken by KV acquire with a session of the
// acquisition's own. A Lock or TryLock holds one permit. Every Semaphore
// of one name must agree on the number of permits: one of 3 and one of 2
// would let 3 holders in. Safe for concurrent use; Lock calls of one
// Semaphore queue locally, in arrival order, as a Locker's do.
type Semaphore struct {
	l       *Locker // the settings; its key is the semaphore's, which holds no value
	permits []string
}

var _ locks.Locker = (*Semaphore)(nil)

// NewSemaphore returns the semaphore called name of permits permits on the
// Consul cluster behind client, with a lock-delay of DefaultLockDelay(TTL)
// and servers assumed to accept session TTLs from MinSessionTTL. Its keys
// are under DefaultSemaphorePrefix unless locks.WithPrefix says; the other
// options are New's.
//
// Each permit is a key acquired by a session, so Consul itself takes a
// permit back when its holder's session is invalidated (TTL, destroy), and
// the lock-delay keeps it from everybody for as long as the mutex's key.
// The token is the permit key's ModifyIndex read right after the acquire,
// a Raft index: one counter for every write, so tokens strictly increase
// across all permits. Waiters queue as the mutex's do; the head of the
// queue blocks on the permits with one blocking query over their prefix,
// and tries a permit when one reads free (see Lock): a release wakes one
// waiter, not every Semaphore of the name.
func NewSemaphore(client *api.Client, name string, permits int, opts ...locks.Option) (*Semaphore, error) {
	o, err := locks.Resolve(DefaultSemaphorePrefix, opts...)
	if err != nil {
		return nil, fmt.Errorf("consullock: %w", err)
	}
	return NewSemaphoreWithSession(client, name, permits, Session{LockDelay: DefaultLockDelay(o.TTL)}, opts...)
}

// NewSemaphoreWithSession is NewSemaphore with the Consul-specific
// settings s.
func NewSemaphoreWithSession(client *api.Client, name string, permits int, s Session, opts ...locks.Option) (*Semaphore, error) {
	if permits < 1 {
		return nil, fmt.Errorf("consullock: %w: %d permits (at least 1)", locks.ErrInvalidOption, permits)
	}
	l, err := build(client, name, DefaultSemaphorePrefix, s, opts)
	if err != nil {
		return nil, err
	}
	sem := &Semaphore{l: l}
	for i := range permits {
		sem.permits = append(sem.permits, layout.ConsulPermit(l.key, i))
	}
	return sem, nil
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.l.name }

// Key returns the semaphore's key, under which its permits' keys are
// (PermitKey). The key itself is never written.
func (s *Semaphore) Key() string { return s.l.key }

// Permits returns the number of permits.
func (s *Semaphore) Permits() int { return len(s.permits) }

// TryLock makes one attempt: it reads the permits and tries to acquire the
// free ones in turn. It returns locks.ErrLocked when every permit is held
// or under a lock-delay; the attempt's session is then destroyed, and no
// permit is left acquired.
func (s *Semaphore) TryLock(ctx context.Context) (locks.Lease, error) {
	return s.l.reentry.Acquire(ctx, true, s.tryLock)
}

func (s *Semaphore) tryLock(ctx context.Context) (locks.Lease, error) {
	return s.l.tryOnce(ctx, func(a *attempt, ctx context.Context) (locks.Lease, error) {
		w := &permitWaiter{waiter: waiter{l: s.l, began: s.l.opt.Clock.Now()}, s: s}
		free, err := w.read(ctx, 0, 0, time.Time{})
		if err != nil {
			return nil, err
		}
		return w.tryEach(ctx, a, free)
	})
}

// Lock waits until it holds a permit, ctx ends (an error wrapping
// ctx.Err()) or the wait budget runs out (locks.ErrWaitBudget). It waits
// in the semaphore's queue as the mutex's Lock does (see the package
// documentation), by blocking queries, never a poll: behind another
// waiter, on that waiter's queue entry; at the head of the queue, on the
// permits' prefix, trying the permits that read free whenever the
// prefix's index moves, and after a refusal of every free permit (a
// lock-delay after an invalidated session) blocking until the lock-delay
// should be over, woken early if a permit changes. A waiter granted a
// permit deletes its queue entry at once, which wakes the next in line:
// a release wakes the head of the queue only, not every waiter. A waiter
// whose predecessor stays put for TTL/2 reads the permits, and tries them
// if one reads free. The waiting session is renewed every TTL/2.
func (s *Semaphore) Lock(ctx context.Context) (locks.Lease, error) {
	return s.l.reentry.Acquire(ctx, false, s.lock)
}

func (s *Semaphore) lock(ctx context.Context) (locks.Lease, error) {
	l := s.l
	w := &permitWaiter{waiter: waiter{l: l, began: l.opt.Clock.Now()}, s: s}
	w.lookFree = w.anyFree
	a, leave, err := l.begin(ctx, w.began)
	if err != nil {
		return nil, err
	}
	defer leave()
	for {
		lease, err := w.await(ctx, a)
		switch {
		case err == nil:
			a.leaveQueue(ctx)
			return lease, nil
		case errors.Is(err, errSessionGone), errors.Is(err, errLost), errors.Is(err, locks.ErrLeaseExpired):
			// Start over with a new session at the back of the queue,
			// reading the permits afresh once at its head.
			a.abandon()
			w.index, w.delayEnd, w.head = 0, time.Time{}, false
			if a, err = l.newAttempt(ctx); err != nil {
				return nil, err
			}
		default:
			a.abandon()
			return nil, err
		}
	}
}

// permitWaiter is the state of one Lock call's wait for a permit.
type permitWaiter struct {
	waiter
	s        *Semaphore
	seen     map[string]freeSeen // the free permits, as first seen free
	delayEnd time.Time           // after every free permit refused: when to try again
}

// freeSeen is when a permit was first read free at its ModifyIndex: its
// lock-delay, if any, started before then.
type freeSeen struct {
	index uint64
	at    time.Time
}

// await waits for its turn in the queue, then reads the permits until
// one is acquired. A waiter told by awaitTurn to look although not yet at
// the head (its predecessor stalled with a permit free) tries the permits
// read then, once, and goes back to its place if refused.
func (w *permitWaiter) await(ctx context.Context, a *attempt) (locks.Lease, error) {
	l := w.l
	for {
		if !w.head {
			if _, err := w.awaitTurn(ctx, a); err != nil {
				return nil, err
			}
			w.index = 0 // read the permits at once
		}
		if err := a.keepAlive(ctx); err != nil {
			return nil, err
		}
		now := l.opt.Clock.Now()
		delayOver := !w.delayEnd.IsZero() && !now.Before(w.delayEnd)
		wait, deadline, err := w.bound(now, a, w.delayEnd)
		if err != nil {
			return nil, err
		}
		index := w.index
		if delayOver {
			index = 0 // the lock-delay should be over: look at once
		}
		free, err := w.read(ctx, index, wait, deadline)
		if err != nil {
			return nil, err
		}
		moved := index == 0 || w.index != index
		switch {
		case len(free) == 0 && !w.head:
			continue // back to its place in the queue
		case len(free) == 0:
			w.delayEnd, w.retries = time.Time{}, 0
			continue
		case !moved && !delayOver:
			continue // a blocking query timed out: renew, look at the clock
		}
		lease, err := w.tryEach(ctx, a, free)
		if err != nil || lease != nil {
			return lease, err
		}
		w.delayEnd = w.nextTry(free)
	}
}

// read lists the permits, blocking at index unless it is 0, records the
// next index and when each free permit was first seen free, and returns
// the keys of the free permits.
func (w *permitWaiter) read(ctx context.Context, index uint64, wait time.Duration, deadline time.Time) ([]string, error) {
	l := w.l
	var pairs api.KVPairs
	meta, err := w.query(ctx, index, wait, deadline, func(q *api.QueryOptions) (m *api.QueryMeta, err error) {
		pairs, m, err = l.client.KV().List(layout.ConsulPermits(l.key), q)
		return m, err
	})
	if err != nil {
		return nil, err
	}
	w.index = nextIndex(index, meta.LastIndex)
	byKey := make(map[string]*api.KVPair, len(pairs))
	for _, p := range pairs {
		byKey[p.Key] = p
	}
	if w.seen == nil {
		w.seen = make(map[string]freeSeen)
	}
	now := l.opt.Clock.Now()
	var free []string
	for _, k := range w.s.permits {
		var at uint64 // the index the permit was released at; 0: never written
		if p := byKey[k]; p != nil {
			if p.Session != "" {
				delete(w.seen, k)
				continue
			}
			at = p.ModifyIndex
		}
		if s, ok := w.seen[k]; !ok || s.index != at {
			w.seen[k] = freeSeen{index: at, at: now}
		}
		free = append(free, k)
	}
	return free, nil
}

// anyFree reads the permits at once and reports whether one is free.
func (w *permitWaiter) anyFree(ctx context.Context, deadline time.Time) (bool, error) {
	free, err := w.read(ctx, 0, 0, deadline)
	return len(free) > 0, err
}

// tryEach tries to acquire each free permit in turn with the attempt's
// session; a nil lease and nil error mean that all were refused.
func (w *permitWaiter) tryEach(ctx context.Context, a *attempt, free []string) (locks.Lease, error) {
	for _, k := range free {
		a.key = k
		lease, err := a.try(ctx)
		if err != nil || lease != nil {
			return lease, err
		}
	}
	return nil, nil
}

// nextTry is when to try again after every free permit refused the
// attempt: a lock-delay after an invalidated session. It is the earliest
// time one of their lock-delays should be over (first seen free + the
// Semaphore's lock-delay); once that has passed without success (a holder
// with a longer lock-delay, clocks that disagree), the tries back off as
// the mutex's do (see waiter.delayEnd).
func (w *permitWaiter) nextTry(free []string) time.Time {
	var end time.Time
	for _, k := range free {
		if e := w.seen[k].at.Add(w.l.lockDelay); end.IsZero() || e.Before(end) {
			end = e
		}
	}
	w.freeSince = end.Add(-w.l.lockDelay)
	return w.waiter.delayEnd()
}
