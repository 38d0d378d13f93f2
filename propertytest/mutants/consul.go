package mutants

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
)

func init() {
	register(Mutant{
		Name: "consul-ignores-session-invalidation",
		Bug: "a Consul lock that keeps believing it holds the lock after its session was invalidated: " +
			"a renewal answered 404 (session unknown) counts as a success",
		Breaks:  propertytest.Symmetry,
		Factory: consulIgnoresInvalidation,
		Fixed:   backends.ConsulLock(),
		// backends.ConsulLock's options: a crashed holder's lock is
		// free 3×TTL after its last renewal.
		Options: backends.ConsulLockOptions(),
	})
}

// consulEpoch is where the mutant's manual clock starts.
var consulEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// consulIgnoresInvalidation is the Factory of blindSession on miniconsul in
// manual time, as backends.ConsulLock.
//
// Why the suite reports symmetry and not exclusivity: a session is
// invalidated before the holder's local deadline only by a fault
// (backends.ConsulLock's FaultPartition), and the suite's lease model
// counts any loss before the TTL as a violation, so no lock can claim that
// fault and a violation under it proves nothing. Without it, Consul
// invalidates the session 2×TTL after its last renewal, after the holder's
// local deadline; the mutant's bug then shows when a client whose lease ran
// out renews it while another client holds the lock (the suite's foreign
// Renew): Consul answers 404 and the mutant reports success.
func consulIgnoresInvalidation(env propertytest.Env) (*propertytest.Backend, error) {
	c, err := consulfake.Start(consulfake.ManualTime(consulEpoch), consulfake.ForceMiniconsul(),
		consulfake.SessionTTLMin(locks.MinTTL))
	if err != nil {
		return nil, err
	}
	propertytest.CloseAtCleanup(env, "miniconsul", c)
	return &propertytest.Backend{
		NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
			o, err := locks.Resolve("", append(c.LockOptions(), opts...)...)
			if err != nil {
				return nil, err
			}
			return &blindSession{c: c.NewClient(), name: name, key: o.Prefix + name, opt: o}, nil
		},
		Clock:     c.Clock(),
		Advance:   c.Advance,
		InProcess: true, // miniconsul's clients dial in memory
	}, nil
}

// blindSession is consullock's acquisition (a session with the lease's TTL
// and a lock-delay of one TTL, KV acquire, the key's ModifyIndex as the
// token) with a lease of its own that ignores the loss of its session.
type blindSession struct {
	c    *api.Client
	name string
	key  string
	opt  locks.Options
}

// TryLock creates a session and acquires the key with it once.
func (l *blindSession) TryLock(ctx context.Context) (locks.Lease, error) {
	w := (&api.WriteOptions{}).WithContext(ctx)
	start := l.opt.Clock.Now()
	id, _, err := l.c.Session().Create(&api.SessionEntry{TTL: l.opt.TTL.String(),
		Behavior: api.SessionBehaviorRelease, LockDelay: l.opt.TTL}, w)
	if err != nil {
		return nil, fmt.Errorf("mutant: create session: %w", err)
	}
	ok, _, err := l.c.KV().Acquire(&api.KVPair{Key: l.key, Session: id}, w)
	if err == nil && ok {
		kv, _, rerr := l.c.KV().Get(l.key, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
		if rerr == nil && kv != nil && kv.Session == id {
			b := &blindSessionLease{l: l, id: id, token: locks.Token(kv.ModifyIndex), done: make(chan struct{})}
			b.extend(start)
			return b, nil
		}
		err = rerr
	}
	_, _, _ = l.c.KV().Release(&api.KVPair{Key: l.key, Session: id}, nil)
	_, _ = l.c.Session().Destroy(id, nil)
	if err != nil {
		return nil, fmt.Errorf("mutant: acquire: %w", err)
	}
	return nil, fmt.Errorf("mutant: %w", locks.ErrLocked)
}

// Lock retries every TTL/10 of the lock's clock: good enough for a mutant.
func (l *blindSession) Lock(ctx context.Context) (locks.Lease, error) {
	return retryEvery(ctx, l.opt, l.TryLock)
}

// blindSessionLease is one acquisition. Its local deadline is honest
// (last renewal sent + TTL − drift), and Renew asks Consul even after it,
// which is sound as long as Consul's answer is heeded.
type blindSessionLease struct {
	l     *blindSession
	id    string
	token locks.Token
	done  chan struct{}

	mu       sync.Mutex
	deadline time.Time
	unlocked bool
	closed   bool
	expiry   locks.Timer
}

// extend moves the deadline to start + TTL − drift and arms Done to close
// then: the lease's own clock is honest, only Consul's answers are not.
func (b *blindSessionLease) extend(start time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deadline = start.Add(b.l.opt.TTL - locks.Drift(b.l.opt.TTL))
	if b.expiry != nil {
		b.expiry.Stop()
	}
	b.expiry = b.l.opt.Clock.AfterFunc(b.deadline.Sub(b.l.opt.Clock.Now()), func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if !b.l.opt.Clock.Now().Before(b.deadline) {
			b.closeLocked()
		}
	})
}

// closeLocked closes Done once.
func (b *blindSessionLease) closeLocked() {
	if !b.closed {
		b.closed = true
		close(b.done)
		b.expiry.Stop()
	}
}

var _ locks.Lease = (*blindSessionLease)(nil)

// Name returns the lock's name.
func (b *blindSessionLease) Name() string { return b.l.name }

// Token returns the key's ModifyIndex at the grant.
func (b *blindSessionLease) Token() (locks.Token, bool) { return b.token, true }

// Done closes at Unlock or once the local deadline passed; never when
// Consul says the session is gone, since the mutant never hears it.
func (b *blindSessionLease) Done() <-chan struct{} { return b.done }

// Deadline is the local end of validity.
func (b *blindSessionLease) Deadline() time.Time { b.mu.Lock(); defer b.mu.Unlock(); return b.deadline }

func (b *blindSessionLease) expired(now time.Time) bool { return !now.Before(b.Deadline()) }
func (b *blindSessionLease) released() bool             { b.mu.Lock(); defer b.mu.Unlock(); return b.unlocked }

// Err is locks.ErrReleased after Unlock, locks.ErrLeaseExpired once past
// the deadline (for good: a later renewal does not revive it), else nil.
func (b *blindSessionLease) Err() error {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	switch {
	case b.released():
		return locks.ErrReleased
	case closed || b.expired(b.l.opt.Clock.Now()):
		return locks.ErrLeaseExpired
	}
	return nil
}

// Renew renews the session; THE BUG: a session Consul no longer knows
// (invalidated, answered 404) counts as renewed.
func (b *blindSessionLease) Renew(ctx context.Context) error {
	if b.released() {
		return locks.ErrReleased
	}
	start := b.l.opt.Clock.Now()
	if _, _, err := b.l.c.Session().Renew(b.id, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("mutant: renew: %w", err)
	}
	if b.released() {
		return nil
	}
	b.extend(start)
	return nil
}

// Unlock releases the key and destroys the session, reporting a key the
// session no longer holds as locks.ErrNotHeld.
func (b *blindSessionLease) Unlock(ctx context.Context) error {
	b.mu.Lock()
	if b.unlocked {
		b.mu.Unlock()
		return locks.ErrReleased
	}
	b.unlocked = true
	b.closeLocked()
	b.mu.Unlock()
	w := (&api.WriteOptions{}).WithContext(ctx)
	ok, _, err := b.l.c.KV().Release(&api.KVPair{Key: b.l.key, Session: b.id}, w)
	_, _ = b.l.c.Session().Destroy(b.id, w) // gone already after an invalidation
	var se api.StatusError
	switch {
	case errors.As(err, &se) && strings.Contains(se.Body, "invalid session"):
		return fmt.Errorf("mutant: session %s is gone: %w", b.id, locks.ErrNotHeld)
	case err != nil:
		return fmt.Errorf("mutant: release: %w", err)
	case !ok:
		return fmt.Errorf("mutant: %w", locks.ErrNotHeld)
	}
	return nil
}

// retryEvery calls try until it returns anything but locks.ErrLocked,
// pausing TTL/10 of o's clock in between, or ctx ends.
func retryEvery(ctx context.Context, o locks.Options, try func(context.Context) (locks.Lease, error)) (locks.Lease, error) {
	for {
		lease, err := try(ctx)
		if !errors.Is(err, locks.ErrLocked) {
			return lease, err
		}
		t := o.Clock.NewTimer(o.TTL / 10)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("mutant: lock: %w", ctx.Err())
		}
	}
}
