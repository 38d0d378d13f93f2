package mutants

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
)

func init() {
	register(
		Mutant{Name: "redis-without-fencing-under-pause", Breaks: propertytest.Exclusivity,
			Bug:     "a Redis lock that claims to be safe under pauses but gives its leases no fencing token, so a holder paused past its lease writes after the next holder began",
			Factory: redislockWith(func(l locks.Lease, _ locks.Options) locks.Lease { return unfencedLease{l} }),
			Fixed:   backends.RedisLock(), Options: claiming()},
		Mutant{Name: "no-renewal-while-work-outlasts-ttl", Breaks: propertytest.Exclusivity,
			Bug:     "the lease counts itself valid as if a watchdog renewed it every TTL/3, but no watchdog runs and no fencing token guards the work, so work that outlasts the TTL goes on after the key expired and the next holder began",
			Factory: redislockWith(newTrustingLease),
			Fixed:   redislockWith(func(l locks.Lease, _ locks.Options) locks.Lease { return unfencedLease{l} }),
			// It does not claim pauses (nothing unfenced can); the holder's
			// work runs past the TTL while its lease says it is valid.
			Options: claiming(propertytest.FaultCrash)},
	)
}

// redislockWith is backends.RedisLock with every lease passed through
// wrap, which gets the lease and the Locker's options (the backend's clock
// and the suite's settings).
func redislockWith(wrap func(locks.Lease, locks.Options) locks.Lease) propertytest.Factory {
	inner := backends.RedisLock()
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		be, err := inner(env)
		if err != nil {
			return nil, err
		}
		newLocker := be.NewLocker
		be.NewLocker = func(name string, opts ...locks.Option) (locks.Locker, error) {
			o, err := locks.Resolve("", append([]locks.Option{locks.WithClock(be.Clock)}, opts...)...)
			if err != nil {
				return nil, err
			}
			l, err := newLocker(name, opts...)
			if err != nil {
				return nil, err
			}
			return wrappedLocker{Locker: l, wrap: func(l locks.Lease) locks.Lease { return wrap(l, o) }}, nil
		}
		return be, nil
	}
}

// wrappedLocker passes every lease its Locker grants through wrap.
type wrappedLocker struct {
	locks.Locker
	wrap func(locks.Lease) locks.Lease
}

// TryLock is the Locker's, with the lease wrapped.
func (w wrappedLocker) TryLock(ctx context.Context) (locks.Lease, error) {
	l, err := w.Locker.TryLock(ctx)
	if l == nil {
		return nil, err
	}
	return w.wrap(l), err
}

// Lock is the Locker's, with the lease wrapped.
func (w wrappedLocker) Lock(ctx context.Context) (locks.Lease, error) {
	l, err := w.Locker.Lock(ctx)
	if l == nil {
		return nil, err
	}
	return w.wrap(l), err
}

// unfencedLease hides its lease's fencing token: Token reports it unsafe.
type unfencedLease struct{ locks.Lease }

// Token returns the hidden lease's token, marked unsafe.
func (u unfencedLease) Token() (locks.Token, bool) { tok, _ := u.Lease.Token(); return tok, false }

// trustingLease is an unfenced lease that believes a watchdog keeps it
// alive: its Deadline is always a TTL (less drift) ahead of now, and it
// reports no error until Unlock, whatever became of the key.
type trustingLease struct {
	unfencedLease
	clock locks.Clock
	ttl   time.Duration

	once sync.Once
	done chan struct{}
}

func newTrustingLease(l locks.Lease, o locks.Options) locks.Lease {
	return &trustingLease{unfencedLease: unfencedLease{l}, clock: o.Clock, ttl: o.TTL, done: make(chan struct{})}
}

// Deadline is where the missing watchdog's next renewal would put it.
func (l *trustingLease) Deadline() time.Time {
	return l.clock.Now().Add(l.ttl - locks.Drift(l.ttl))
}

// Err ignores that the lease ran out: only Unlock ends it.
func (l *trustingLease) Err() error {
	select {
	case <-l.done:
		return l.Lease.Err()
	default:
	}
	if err := l.Lease.Err(); err != nil && !errors.Is(err, locks.ErrLeaseExpired) {
		return err
	}
	return nil
}

// Done is closed by Unlock only.
func (l *trustingLease) Done() <-chan struct{} { return l.done }

// Unlock releases the lease and closes Done.
func (l *trustingLease) Unlock(ctx context.Context) error {
	defer l.once.Do(func() { close(l.done) })
	return l.Lease.Unlock(ctx)
}
