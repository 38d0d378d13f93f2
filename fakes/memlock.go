package fakes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// MemLock is an in-memory locks.Locker for unit tests that need no backend.
// The MemLock itself is the backend: every goroutine that uses one value
// contends for the same lock. Each grant gets a fresh owner value and a
// fencing token one higher than the last (the first is 1), and returns a
// locks.ManagedLease, so Done, Err, the watchdog and the double-unlock rules
// are those of every lockproof lock.
//
// The holder's entry expires TTL after its grant (or last renewal) by
// Options.Clock; pass a *Clock with locks.WithClock to expire it with
// Advance. Lock waits for a release, an expiry or ExpireNow, never on a
// ticker. ExpireNow and FailNext inject the faults a real backend has.
// Create it with NewMemLock; it is safe for concurrent use. With
// locks.WithOwner, Lock and TryLock re-enter the owner's live grant (see
// locks.WithOwner); with locks.WithMaxHold the lease ends itself.
//
// Having no client, it calls locks.GateRequest itself: each acquire attempt
// (TryLock, and every attempt of Lock) is the request "memlock acquire", a
// renewal "memlock renew" and a release "memlock release", each passed
// through the locks.Gate of the operation's context, if any, before the
// lock's state is read.
type MemLock struct {
	name    string
	opt     locks.Options
	reentry *locks.Reentry // nil without locks.WithOwner

	mu       sync.Mutex
	owner    string        // owner value of the holder; "" when free
	grants   uint64        // grants so far; the last one's token
	expires  time.Time     // when the holder's entry runs out, by opt.Clock
	changed  chan struct{} // closed and replaced when the lock may have become free
	failNext error
}

var _ locks.Locker = (*MemLock)(nil)

// NewMemLock returns a free lock named name. opts are resolved as for every
// lock (locks.Resolve); the prefix is accepted and unused. It returns an
// error wrapping locks.ErrInvalidName, locks.ErrInvalidTTL or
// locks.ErrInvalidOption for bad input.
func NewMemLock(name string, opts ...locks.Option) (*MemLock, error) {
	if err := locks.ValidateName(name); err != nil {
		return nil, fmt.Errorf("fakes: new mem lock: %w", err)
	}
	o, err := locks.Resolve("mem:", opts...)
	if err != nil {
		return nil, fmt.Errorf("fakes: new mem lock %q: %w", name, err)
	}
	return &MemLock{name: name, opt: o, reentry: locks.NewReentry(o), changed: make(chan struct{})}, nil
}

// TryLock makes one attempt: it returns a lease, an error wrapping
// locks.ErrLocked while another owner holds the lock, or the error injected
// by FailNext.
func (l *MemLock) TryLock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, true, l.tryLock)
}

// tryLock is TryLock without re-entry (see locks.WithOwner).
func (l *MemLock) tryLock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lock %q: trylock: %w", l.name, err)
	}
	lease, _, err := l.acquire(ctx)
	return lease, err
}

// Lock waits until it holds the lock. It wakes on every release, expiry and
// ExpireNow, and at the holder's expiry by Options.Clock. It returns an
// error wrapping ctx.Err() when ctx ends, locks.ErrWaitBudget when
// Options.WaitBudget has passed on Options.Clock and one last attempt fails,
// or the error injected by FailNext.
func (l *MemLock) Lock(ctx context.Context) (locks.Lease, error) {
	return l.reentry.Acquire(ctx, false, l.lock)
}

// lock is Lock without re-entry (see locks.WithOwner).
func (l *MemLock) lock(ctx context.Context) (locks.Lease, error) {
	var budget <-chan time.Time
	if l.opt.WaitBudget > 0 {
		t := l.opt.Clock.NewTimer(l.opt.WaitBudget)
		defer t.Stop()
		budget = t.C()
	}
	for spent := false; ; {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lock %q: lock: %w", l.name, err)
		}
		lease, w, err := l.acquire(ctx)
		if !errors.Is(err, locks.ErrLocked) {
			return lease, err
		}
		if spent {
			return nil, fmt.Errorf("lock %q: lock: %w (%v)", l.name, locks.ErrWaitBudget, l.opt.WaitBudget)
		}
		spent = l.wait(ctx, w, budget)
	}
}

// waitFor is what a blocked Lock waits on.
type waitFor struct {
	changed <-chan struct{}
	expires time.Time // when the holder's entry runs out
}

// wait blocks until w fires or ctx ends, and reports whether it was the
// budget that ran out. The caller makes one last attempt either way.
func (l *MemLock) wait(ctx context.Context, w waitFor, budget <-chan time.Time) (spent bool) {
	// Measured now, not at the attempt: the clock may have moved since.
	expiry := l.opt.Clock.NewTimer(w.expires.Sub(l.opt.Clock.Now()))
	defer expiry.Stop()
	select {
	case <-w.changed:
	case <-expiry.C():
	case <-ctx.Done():
	case <-budget:
		return true
	}
	return false
}

// acquire makes one attempt. When the lock is held it returns an error
// wrapping locks.ErrLocked and what to wait on.
func (l *MemLock) acquire(ctx context.Context) (locks.Lease, waitFor, error) {
	done := locks.GateRequest(ctx, "memlock acquire")
	defer done()
	l.mu.Lock()
	if err := l.injectedLocked("acquire"); err != nil {
		l.mu.Unlock()
		return nil, waitFor{}, fmt.Errorf("lock %q: %w", l.name, err)
	}
	now := l.opt.Clock.Now()
	l.expireLocked(now)
	if l.owner != "" {
		w := waitFor{changed: l.changed, expires: l.expires}
		l.mu.Unlock()
		return nil, w, fmt.Errorf("lock %q: %w", l.name, locks.ErrLocked)
	}
	l.grants++
	l.owner, l.expires = locks.NewOwner(), now.Add(l.opt.TTL)
	spec := locks.LeaseSpec{Name: l.name, Token: locks.Token(l.grants), Fenced: true, Start: now}
	ops := &memLeaseOps{l: l, owner: l.owner}
	l.mu.Unlock()

	lease := locks.NewLease(spec, ops, l.opt)
	locks.Observe(ctx, l.opt.Observer, locks.Event{
		Point: locks.PointAcquired, Name: spec.Name, Token: spec.Token, Fenced: true,
	})
	return lease, waitFor{}, nil
}

// injectedLocked returns, and clears, the failure set by FailNext.
func (l *MemLock) injectedLocked(op string) error {
	err := l.failNext
	if err == nil {
		return nil
	}
	l.failNext = nil
	return fmt.Errorf("mem: injected failure on %s: %w", op, err)
}

// expireLocked drops the holder whose entry has run out by now.
func (l *MemLock) expireLocked(now time.Time) {
	if l.owner != "" && !now.Before(l.expires) {
		l.freeLocked()
	}
}

// freeLocked clears the holder and wakes every waiter.
func (l *MemLock) freeLocked() {
	l.owner = ""
	close(l.changed)
	l.changed = make(chan struct{})
}

// ExpireNow makes the current holder lose the lock on the backend at once,
// as if its TTL had run out: waiters are woken, and the holder's lease finds
// out at its next renewal or unlock (locks.ErrNotHeld). It does nothing when
// the lock is free.
func (l *MemLock) ExpireNow() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.owner != "" {
		l.freeLocked()
	}
}

// FailNext makes the next backend operation (an acquire attempt, a renewal
// or a release, whoever sends it, the watchdog included) fail with an error
// wrapping err, changing nothing. FailNext(nil) cancels a pending failure.
func (l *MemLock) FailNext(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failNext = err
}

// Holder returns the fencing token of the current holder, and false when the
// lock is free (never granted, released or expired by the clock).
func (l *MemLock) Holder() (tok locks.Token, held bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expireLocked(l.opt.Clock.Now())
	if l.owner == "" {
		return 0, false
	}
	return locks.Token(l.grants), true
}

// Grants returns how many times the lock has been granted.
func (l *MemLock) Grants() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.grants
}

// memLeaseOps are the owner-checked backend operations of one grant.
type memLeaseOps struct {
	l     *MemLock
	owner string
}

var _ locks.LeaseOps = (*memLeaseOps)(nil)

// Renew extends the entry by the TTL from now, if it is still this owner's.
func (o *memLeaseOps) Renew(ctx context.Context) error {
	return o.do(ctx, "renew", func(now time.Time) {
		o.l.expires = now.Add(o.l.opt.TTL)
	})
}

// Release frees the lock, if it is still this owner's.
func (o *memLeaseOps) Release(ctx context.Context) error {
	return o.do(ctx, "release", func(time.Time) { o.l.freeLocked() })
}

// do runs change under the lock if the entry is still this owner's.
func (o *memLeaseOps) do(ctx context.Context, op string, change func(now time.Time)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mem: %s: %w", op, err)
	}
	done := locks.GateRequest(ctx, "memlock "+op)
	defer done()
	l := o.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.injectedLocked(op); err != nil {
		return err
	}
	now := l.opt.Clock.Now()
	l.expireLocked(now)
	if l.owner != o.owner {
		return fmt.Errorf("mem: %s: %w", op, locks.ErrNotHeld)
	}
	change(now)
	return nil
}
