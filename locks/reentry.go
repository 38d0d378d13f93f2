package locks

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// WithOwner makes id the owner of every acquisition through the Locker
// (default: none, every acquisition is an owner of its own). While an
// acquisition of id is live, Lock and TryLock through the same Locker
// return at once a new hold on it: a Lease with the same fencing token,
// Deadline and max hold (see WithMaxHold). Each hold is unlocked once; the
// lock is released on the backend when the last hold is unlocked. A hold's
// Done closes when it is unlocked or when the acquisition ends (expired,
// lost, max hold), and with it every other hold's.
//
// Re-entry is by owner identity, not by goroutine: any goroutine may take
// or unlock a hold. It is kept by the Locker, in the client, as Curator's
// InterProcessMutex keeps its count; the owner id is not written on the
// backend. A second Locker with the same id (another process, or the same
// job restarted) is therefore an ordinary contender: it waits until the
// holds of the first are released or their lease expires, and then gets a
// new acquisition with a higher token. A count on the server (Redisson's
// RLock) would let a restarted owner enter the holds of its crashed
// predecessor, which it cannot know the number of: unlocking its own holds
// would leave the lock taken for as long as anyone renews it. Re-entry
// across Lockers is refused for that reason.
//
// A TryLock that finds another Lock or TryLock of the same Locker on its way
// to the backend returns ErrLocked: the owner does not hold the lock yet.
// id must be non-empty, valid UTF-8, at most MaxNameLen bytes and free of
// control characters.
func WithOwner(id string) Option {
	return func(o *Options) { o.Owner, o.ownerSet = id, true }
}

// Reentry is a Locker's table of its owner's holds (see WithOwner). A
// backend makes one with NewReentry and passes every Lock and TryLock
// through Acquire; without an owner it is nil and Acquire only calls the
// backend. Safe for concurrent use.
type Reentry struct {
	opt     Options
	pending chan struct{} // holds a token while an acquisition is on its way
	mu      sync.Mutex
	current *acquisition // the owner's live acquisition; nil when none
}

// acquisition is one grant on the backend and the holds taken on it.
type acquisition struct {
	base  *ManagedLease
	holds int // not yet unlocked
}

// NewReentry returns the hold table for o.Owner, or nil when o has none.
func NewReentry(o Options) *Reentry {
	if o.Owner == "" {
		return nil
	}
	return &Reentry{opt: o, pending: make(chan struct{}, 1)}
}

// Acquire returns a new hold on the owner's live acquisition if there is
// one, and otherwise acquires with acquire (the backend's Lock or TryLock),
// which must return a *ManagedLease. try says that acquire is a TryLock: a
// TryLock does not wait for another acquisition of the owner on its way,
// it returns ErrLocked. On a nil Reentry, Acquire returns acquire(ctx).
func (r *Reentry) Acquire(ctx context.Context, try bool, acquire func(context.Context) (Lease, error)) (Lease, error) {
	if r == nil {
		return acquire(ctx)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lock: owner %q: %w", r.opt.Owner, err)
	}
	if h := r.reenter(); h != nil {
		return h, nil
	}
	if try {
		select {
		case r.pending <- struct{}{}:
		default:
			return nil, fmt.Errorf("lock: owner %q: %w (its own acquisition is on its way)", r.opt.Owner, ErrLocked)
		}
	} else {
		select {
		case r.pending <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("lock: owner %q: %w", r.opt.Owner, ctx.Err())
		}
	}
	defer func() { <-r.pending }()
	// The acquisition that was on its way may have succeeded meanwhile.
	if h := r.reenter(); h != nil {
		return h, nil
	}
	lease, err := acquire(ctx)
	if err != nil {
		return nil, err
	}
	base, ok := lease.(*ManagedLease)
	if !ok {
		_ = lease.Unlock(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("lock: owner %q: %w: re-entry needs a *ManagedLease, got %T", r.opt.Owner, ErrInvalidOption, lease)
	}
	a := &acquisition{base: base}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current = a
	return r.holdLocked(a), nil
}

// reenter returns a new hold on the live acquisition, or nil when there is
// none.
func (r *Reentry) reenter() *hold {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current == nil || r.current.base.usable() != nil {
		return nil
	}
	return r.holdLocked(r.current)
}

func (r *Reentry) holdLocked(a *acquisition) *hold {
	a.holds++
	h := &hold{r: r, a: a, done: make(chan struct{})}
	a.base.afterDone(h.close)
	return h
}

// Holds returns the number of holds on the owner's live acquisition not
// yet unlocked, 0 when there is none.
func (r *Reentry) Holds() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current == nil || r.current.base.Err() != nil {
		return 0
	}
	return r.current.holds
}

// leave counts one hold of a as unlocked and reports whether it was the
// last one; the acquisition is then no longer re-entered.
func (r *Reentry) leave(a *acquisition) (last bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.holds--
	if a.holds > 0 {
		return false
	}
	if r.current == a {
		r.current = nil
	}
	return true
}

// hold is one Lock or TryLock that returned the owner's acquisition.
type hold struct {
	r    *Reentry
	a    *acquisition
	done chan struct{}
	once sync.Once

	mu       sync.Mutex
	unlocked bool
}

var _ Lease = (*hold)(nil)

func (h *hold) close() { h.once.Do(func() { close(h.done) }) }

func (h *hold) Name() string          { return h.a.base.Name() }
func (h *hold) Token() (Token, bool)  { return h.a.base.Token() }
func (h *hold) Deadline() time.Time   { return h.a.base.Deadline() }
func (h *hold) Done() <-chan struct{} { return h.done }
func (h *hold) released() error       { return fmt.Errorf("lock %q: %w", h.Name(), ErrReleased) }
func (h *hold) isUnlocked() bool      { h.mu.Lock(); defer h.mu.Unlock(); return h.unlocked }

// Err is ErrReleased once this hold is unlocked, else the acquisition's.
func (h *hold) Err() error {
	if h.isUnlocked() {
		return h.released()
	}
	return h.a.base.Err()
}

// Renew renews the acquisition, for every hold on it.
func (h *hold) Renew(ctx context.Context) error {
	if h.isUnlocked() {
		return h.released()
	}
	return h.a.base.Renew(ctx)
}

// Unlock ends this hold; the last hold's Unlock releases the lock. An
// earlier one returns the acquisition's error if it has ended (expired,
// lost, max hold), else nil.
func (h *hold) Unlock(ctx context.Context) error {
	h.mu.Lock()
	if h.unlocked {
		h.mu.Unlock()
		return h.released()
	}
	h.unlocked = true
	h.mu.Unlock()
	h.close()
	if h.r.leave(h.a) {
		return h.a.base.Unlock(ctx)
	}
	Observe(ctx, h.r.opt.Observer, h.a.base.event(PointBeforeUnlock))
	return h.a.base.usable()
}
