package mutants

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
)

// epoch is where the manual clocks of the mutants start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// serverBug is the one defect of a memServer.
type serverBug int

const (
	noServerBug        serverBug = iota
	releaseAnyOwner              // Release deletes the lock whoever owns it
	grantWhileHeld               // an acquire grants without looking at the holder
	neverExpire                  // a granted lock has no expiry
	sameTokenEveryTime           // every grant gets fencing token 1
)

func init() {
	register(
		// A successor released by a stale Unlock goes on holding while a
		// third client is granted the lock: that double grant can be what
		// the history shows first (-rapid.seed=7755596149450023088).
		memMutant("unlock-without-owner-check", releaseAnyOwner, propertytest.Symmetry,
			"Unlock deletes the lock without checking that the caller still owns it, so a client whose lease ran out releases its successor's").
			also(propertytest.Exclusivity),
		memMutant("grant-without-check", grantWhileHeld, propertytest.Exclusivity,
			"an acquire overwrites the holder instead of checking that the lock is free"),
		memMutant("no-expiry", neverExpire, propertytest.DeadlockFreedom,
			"a grant never expires, so a holder that crashes keeps the lock forever"),
		memMutant("shared-fencing-token", sameTokenEveryTime, propertytest.Exclusivity,
			"every grant gets fencing token 1, so a fenced resource cannot tell a paused holder from its successor"),
	)
}

// memMutant is a mutant of the in-memory server with bug b.
func memMutant(name string, b serverBug, breaks propertytest.Property, bug string) Mutant {
	return Mutant{Name: name, Bug: bug, Breaks: breaks, Factory: memFactory(b), Fixed: memFactory(noServerBug),
		Options: claiming()}
}

// memFactory is the Factory of a memServer with bug b on a manual clock.
// Every client gets a Locker of its own on the one server.
func memFactory(b serverBug) propertytest.Factory {
	return func(propertytest.Env) (*propertytest.Backend, error) {
		clock := fakes.NewClock(epoch)
		s := newMemServer(clock, b)
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				return s.locker(name, append([]locks.Option{locks.WithClock(clock)}, opts...)...)
			},
			Clock:     clock,
			Advance:   clock.Advance,
			InProcess: true,
		}, nil
	}
}

// memServer is an in-memory lock server for one lock, as a lock service
// would keep it: the owner of the current grant, its expiry on the
// server's clock and the fencing counter. Without a bug it is a correct
// lease lock; each serverBug breaks one of its rules. Safe for concurrent
// use. Having no client, it passes every request through the
// locks.GateRequest of the caller's context, as fakes.MemLock does, so that
// the suite's scheduler orders them and a seed replays exactly.
type memServer struct {
	clock locks.Clock
	bug   serverBug

	mu      sync.Mutex
	owner   string // "" when free
	expires time.Time
	fence   locks.Token
	changed chan struct{} // closed and replaced whenever the lock is freed
}

func newMemServer(clock locks.Clock, b serverBug) *memServer {
	return &memServer{clock: clock, bug: b, changed: make(chan struct{})}
}

// heldLocked reports whether a grant is live at now.
func (s *memServer) heldLocked(now time.Time) bool {
	return s.owner != "" && (s.bug == neverExpire || now.Before(s.expires))
}

// acquire grants the lock to a fresh owner for ttl if it is free. When it
// is held, it returns what to wait on: the channel closed when it is
// freed, and the holder's expiry.
func (s *memServer) acquire(ctx context.Context, ttl time.Duration) (owner string, tok locks.Token, wait <-chan struct{}, expires time.Time, err error) {
	defer locks.GateRequest(ctx, "mem acquire")()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if s.heldLocked(now) && s.bug != grantWhileHeld {
		expires = s.expires
		if !expires.After(now) {
			expires = time.Time{} // neverExpire: only a release frees it
		}
		return "", 0, s.changed, expires, fmt.Errorf("mutants: %w", locks.ErrLocked)
	}
	s.owner, s.expires = locks.NewOwner(), now.Add(ttl)
	s.fence++
	tok = s.fence
	if s.bug == sameTokenEveryTime {
		tok = 1
	}
	return s.owner, tok, nil, time.Time{}, nil
}

// renew extends owner's grant by ttl.
func (s *memServer) renew(ctx context.Context, owner string, ttl time.Duration) error {
	defer locks.GateRequest(ctx, "mem renew")()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if s.owner != owner || !s.heldLocked(now) {
		return fmt.Errorf("mutants: renew: %w", locks.ErrNotHeld)
	}
	s.expires = now.Add(ttl)
	return nil
}

// release frees the lock if owner holds it (whoever holds it, with
// releaseAnyOwner).
func (s *memServer) release(ctx context.Context, owner string) error {
	defer locks.GateRequest(ctx, "mem release")()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bug != releaseAnyOwner && (s.owner != owner || !s.heldLocked(s.clock.Now())) {
		return fmt.Errorf("mutants: release: %w", locks.ErrNotHeld)
	}
	s.owner = ""
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// locker returns a client of s for the lock called name.
func (s *memServer) locker(name string, opts ...locks.Option) (*memLocker, error) {
	if err := locks.ValidateName(name); err != nil {
		return nil, fmt.Errorf("mutants: %w", err)
	}
	o, err := locks.Resolve("", opts...)
	if err != nil {
		return nil, fmt.Errorf("mutants: %w", err)
	}
	return &memLocker{s: s, name: name, opt: o}, nil
}

// memLocker is one client of a memServer.
type memLocker struct {
	s    *memServer
	name string
	opt  locks.Options
}

var _ locks.Locker = (*memLocker)(nil)

// TryLock makes one attempt; it returns locks.ErrLocked when the lock is held.
func (l *memLocker) TryLock(ctx context.Context) (locks.Lease, error) {
	lease, _, _, err := l.try(ctx)
	return lease, err
}

func (l *memLocker) try(ctx context.Context) (locks.Lease, <-chan struct{}, time.Time, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("mutants: try lock: %w", err)
	}
	start := l.opt.Clock.Now()
	owner, tok, wait, expires, err := l.s.acquire(ctx, l.opt.TTL)
	if err != nil {
		return nil, wait, expires, err
	}
	ops := memLeaseOps{s: l.s, owner: owner, ttl: l.opt.TTL}
	lease := locks.NewLease(locks.LeaseSpec{Name: l.name, Token: tok, Fenced: true, Start: start}, ops, l.opt)
	locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: l.name, Token: tok, Fenced: true})
	return lease, nil, time.Time{}, nil
}

// Lock waits until the lock is freed or its holder's grant expires (on the
// Locker's clock), then tries again, until ctx ends.
func (l *memLocker) Lock(ctx context.Context) (locks.Lease, error) {
	for {
		lease, freed, expires, err := l.try(ctx)
		if freed == nil {
			return lease, err
		}
		if err := waitFor(ctx, l.opt.Clock, freed, expires); err != nil {
			return nil, fmt.Errorf("mutants: lock: %w", err)
		}
	}
}

// waitFor waits until freed is closed, the clock reaches expires (no
// bound when expires is zero), or ctx ends.
func waitFor(ctx context.Context, clock locks.Clock, freed <-chan struct{}, expires time.Time) error {
	var timeout <-chan time.Time
	if !expires.IsZero() {
		t := clock.NewTimer(max(expires.Sub(clock.Now()), 0))
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-freed:
	case <-timeout:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// memLeaseOps are one grant's owner-checked operations (as far as the
// server's bug lets them be).
type memLeaseOps struct {
	s     *memServer
	owner string
	ttl   time.Duration
}

// Renew extends the grant by the TTL.
func (o memLeaseOps) Renew(ctx context.Context) error { return o.s.renew(ctx, o.owner, o.ttl) }

// Release frees the lock.
func (o memLeaseOps) Release(ctx context.Context) error { return o.s.release(ctx, o.owner) }
