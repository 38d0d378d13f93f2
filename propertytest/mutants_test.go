package propertytest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
)

// bug is the one defect of a mutant lock.
type bug int

const (
	noBug              bug = iota
	unlockNoOwnerCheck     // Release deletes the key whoever owns it
	grantWithoutCheck      // TryLock grants even while the lock is held
	noExpiry               // the key never expires: SETNX without EXPIRE
	sharedToken            // every grant gets fencing token 1
)

// mutantServer is an in-memory lock server with one deliberate bug.
type mutantServer struct {
	clock locks.Clock
	bug   bug

	mu      sync.Mutex
	owner   string
	expires time.Time
	fence   locks.Token
}

func (s *mutantServer) heldLocked(now time.Time) bool {
	return s.owner != "" && (s.bug == noExpiry || now.Before(s.expires))
}

// mutantLocker is one client of a mutantServer.
type mutantLocker struct {
	s    *mutantServer
	name string
	opt  locks.Options
}

func (l *mutantLocker) TryLock(ctx context.Context) (locks.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := l.s
	s.mu.Lock()
	now := s.clock.Now()
	if s.heldLocked(now) && s.bug != grantWithoutCheck {
		s.mu.Unlock()
		return nil, fmt.Errorf("mutant: %w", locks.ErrLocked)
	}
	s.owner, s.expires = locks.NewOwner(), now.Add(l.opt.TTL)
	s.fence++
	tok := s.fence
	if s.bug == sharedToken {
		tok = 1
	}
	ops := &mutantOps{s: s, owner: s.owner, ttl: l.opt.TTL}
	s.mu.Unlock()
	return locks.NewLease(locks.LeaseSpec{Name: l.name, Token: tok, Fenced: true, Start: now}, ops, l.opt), nil
}

// Lock retries every TTL/4 of the manual clock: good enough for a mutant.
func (l *mutantLocker) Lock(ctx context.Context) (locks.Lease, error) {
	for {
		lease, err := l.TryLock(ctx)
		if !errors.Is(err, locks.ErrLocked) {
			return lease, err
		}
		t := l.opt.Clock.NewTimer(l.opt.TTL / 4)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("mutant: lock: %w", ctx.Err())
		}
	}
}

type mutantOps struct {
	s     *mutantServer
	owner string
	ttl   time.Duration
}

func (o *mutantOps) Renew(context.Context) error {
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	now := o.s.clock.Now()
	if o.s.owner != o.owner || !o.s.heldLocked(now) {
		return locks.ErrNotHeld
	}
	o.s.expires = now.Add(o.ttl)
	return nil
}

func (o *mutantOps) Release(context.Context) error {
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	if o.s.owner != o.owner && o.s.bug != unlockNoOwnerCheck {
		return locks.ErrNotHeld
	}
	o.s.owner = ""
	return nil
}

// mutant is the Factory of a mutantServer with bug b.
func mutant(b bug) Factory {
	return func(t testing.TB) (*Backend, error) {
		clock := fakes.NewClock(epoch)
		s := &mutantServer{clock: clock, bug: b}
		return &Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				o, err := locks.Resolve("mutant:", append([]locks.Option{locks.WithClock(clock)}, opts...)...)
				if err != nil {
					return nil, err
				}
				return &mutantLocker{s: s, name: name, opt: o}, nil
			},
			Clock:   clock,
			Advance: clock.Advance,
		}, nil
	}
}

// unfencedLease hides a lease's fencing token: plain Redis without fencing.
type unfencedLease struct{ locks.Lease }

func (u unfencedLease) Token() (locks.Token, bool) { tok, _ := u.Lease.Token(); return tok, false }

type unfencedLocker struct{ locks.Locker }

func (u unfencedLocker) TryLock(ctx context.Context) (locks.Lease, error) {
	return wrapUnfenced(u.Locker.TryLock(ctx))
}

func (u unfencedLocker) Lock(ctx context.Context) (locks.Lease, error) {
	return wrapUnfenced(u.Locker.Lock(ctx))
}

func wrapUnfenced(l locks.Lease, err error) (locks.Lease, error) {
	if l == nil {
		return nil, err
	}
	return unfencedLease{l}, err
}

// unfencedRedis is redislock on fakes.Redis with its tokens thrown away.
func unfencedRedis() Factory {
	inner := RedisLock()
	return func(t testing.TB) (*Backend, error) {
		be, err := inner(t)
		if err != nil {
			return nil, err
		}
		newLocker := be.NewLocker
		be.NewLocker = func(name string, opts ...locks.Option) (locks.Locker, error) {
			l, err := newLocker(name, opts...)
			if err != nil {
				return nil, err
			}
			return unfencedLocker{l}, nil
		}
		return be, nil
	}
}

// singleNodeAsThree claims three nodes but keeps the lock on node 0 only:
// stopping a minority (node 0) takes the lock down.
func singleNodeAsThree() Factory {
	return func(t testing.TB) (*Backend, error) {
		g := fakes.RedisCluster(t, 3, fakes.ManualTime(epoch), fakes.ForceMiniredis())
		return &Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				return redislock.New(g.Node(0).NewClient(), name, append(g.LockOptions(), opts...)...)
			},
			Clock: g.Clock(), Advance: g.Advance, Nodes: 3,
			StopNode: g.Stop, StartNode: func(i int) { g.Restart(i, true) },
		}, nil
	}
}

// The mutants: each must be caught, with the right property named, as a
// failure (not an expected violation).
func TestMutantsAreCaught(t *testing.T) {
	cases := []struct {
		name    string
		factory Factory
		want    Property
	}{
		{"unlock-without-owner-check", mutant(unlockNoOwnerCheck), Symmetry},
		{"grant-without-check", mutant(grantWithoutCheck), Exclusivity},
		{"no-expiry", mutant(noExpiry), DeadlockFreedom},
		{"shared-fencing-token", mutant(sharedToken), Exclusivity},
		{"redis-without-fencing-under-pause", unfencedRedis(), Exclusivity},
		{"single-node-posing-as-three", singleNodeAsThree(), Availability},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			SetChecks(t, 200)
			start := time.Now()
			rep := Check(t, tc.factory, Options{})
			if !rep.Failed {
				t.Fatalf("mutant %s survived %d runs\n%s", tc.name, rep.Runs, rep.Output)
			}
			broken := rep.Broken()
			if len(broken) == 0 || broken[0] != tc.want {
				t.Fatalf("mutant %s: broken properties %v, want %s first\n%s", tc.name, broken, tc.want, rep.Output)
			}
			if !strings.Contains(rep.Output, "-rapid.seed=") {
				t.Errorf("the failure does not print the seed to replay it:\n%s", rep.Output)
			}
			v := rep.Violations[0]
			if v.History == "" {
				t.Errorf("the violation shows no history: %v", v)
			}
			t.Logf("killed: %s at run %d (%d runs with shrinking) in %v: %s", tc.want, rep.FirstFailure, rep.Runs, time.Since(start).Round(time.Millisecond), v.Detail)
			if _, err := os.Stat(v.Timeline); err != nil {
				t.Errorf("timeline %q: %v", v.Timeline, err)
			}
			t.Logf("timeline: %s", v.Timeline)
		})
	}
}

// The mutant server without its bug passes: the mutants fail for their
// bug, not for the harness.
func TestMutantServerWithoutBugPasses(t *testing.T) {
	rep := Check(t, mutant(noBug), Options{})
	if rep.Failed {
		t.Fatalf("the bug-free mutant server was flagged: %v\n%s", rep.Broken(), rep.Output)
	}
}
