package mutants

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
)

// The mutants that reproduce reported bugs, each walked through the
// schedule that shows its bug, with no property suite in between: the
// mutant must misbehave there and its Fixed twin must not. That keeps
// each mutant honest about its bug even where the suite cannot yet drive
// a run into that schedule.

// testTTL is the TTL of the walk-throughs.
const testTTL = time.Second

// scene is one backend of a mutant (or its twin) and the clients on it.
type scene struct {
	t  *testing.T
	be *propertytest.Backend
}

func newScene(t *testing.T, f propertytest.Factory) *scene {
	t.Helper()
	be, err := f(t)
	if err != nil {
		t.Fatal(err)
	}
	if be.Close != nil {
		t.Cleanup(be.Close)
	}
	return &scene{t: t, be: be}
}

// client returns a Locker with the suite's settings (TTL, no watchdog)
// and obs, if not nil, as its Observer.
func (s *scene) client(obs locks.Observer) locks.Locker {
	s.t.Helper()
	l, err := s.be.NewLocker("reported", locks.WithTTL(testTTL), locks.WithWatchdog(false), locks.WithObserver(obs))
	if err != nil {
		s.t.Fatal(err)
	}
	return l
}

// grant takes the lock for l, failing the test if it is refused.
func (s *scene) grant(l locks.Locker) locks.Lease {
	s.t.Helper()
	lease, err := l.TryLock(context.Background())
	if err != nil {
		s.t.Fatalf("TryLock: %v", err)
	}
	return lease
}

// holds reports whether lease believes it holds the lock now.
func (s *scene) holds(lease locks.Lease) bool {
	return lease.Err() == nil && s.be.Clock.Now().Before(lease.Deadline())
}

// onceAt is an Observer that runs f the first time a lock reaches p.
func onceAt(p locks.Point, f func()) locks.Observer {
	var once sync.Once
	return locks.ObserverFunc(func(_ context.Context, e locks.Event) {
		if e.Point == p {
			once.Do(f)
		}
	})
}

// reported runs walk on mutant name's Factory, expecting it to return
// true (the bug showed), and on its Fixed twin, expecting false.
func reported(t *testing.T, name string, walk func(s *scene) bool) {
	m, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("mutant", func(t *testing.T) {
		if !walk(newScene(t, m.Factory)) {
			t.Errorf("%s did not show its bug: %s", name, m.Bug)
		}
	})
	t.Run("fixed", func(t *testing.T) {
		if walk(newScene(t, m.Fixed)) {
			t.Errorf("the Fixed twin of %s shows the bug", name)
		}
	})
}

// Class 3: a renewal stalled (at locks.PointBeforeRenew) until the lease
// expired and another client took the lock, then sent: it must not
// report success.
func TestStalledRenewal(t *testing.T) {
	for _, name := range []string{"renew-ignores-refusal", "renew-sets-without-owner-check", "renew-extends-any-owner"} {
		t.Run(name, func(t *testing.T) {
			reported(t, name, func(s *scene) bool {
				var next locks.Lease
				b := s.client(nil)
				a := s.client(onceAt(locks.PointBeforeRenew, func() {
					s.be.Advance(testTTL + time.Millisecond)
					next = s.grant(b)
				}))
				held := s.grant(a)
				// The stalled holder's lease expired locally meanwhile; what
				// matters is what its renewal reports.
				err := held.Renew(context.Background())
				return err == nil && s.holds(next)
			})
		})
	}
}

// Class 2: the holder's local deadline must not outlive the key: just
// before it, another client must still be refused.
func TestDeadlineEdge(t *testing.T) {
	reported(t, "validity-adds-drift", func(s *scene) bool {
		held := s.grant(s.client(nil))
		s.be.Advance(held.Deadline().Sub(s.be.Clock.Now()) - time.Millisecond)
		_, err := s.client(nil).TryLock(context.Background())
		return err == nil && s.holds(held)
	})
}

// Class 4: a refused TryLock, then the holder's Unlock: the lock is free,
// and the next client's TryLock must be granted.
func TestFreedAfterRefusal(t *testing.T) {
	for _, name := range []string{"refused-attempt-node-left", "fair-queue-entry-left"} {
		t.Run(name, func(t *testing.T) {
			reported(t, name, func(s *scene) bool {
				held := s.grant(s.client(nil))
				if _, err := s.client(nil).TryLock(context.Background()); !errors.Is(err, locks.ErrLocked) {
					t.Fatalf("TryLock while held: %v, want locks.ErrLocked", err)
				}
				if err := held.Unlock(context.Background()); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
				_, err := s.client(nil).TryLock(context.Background())
				return errors.Is(err, locks.ErrLocked)
			})
		})
	}
}

// Class 5: past its deadline, with no renewal, a lease must say it is
// lost: Done closed, Err not nil.
func TestLossIsSignalled(t *testing.T) {
	for _, name := range []string{"renewal-failure-only-logged", "done-waits-for-server"} {
		t.Run(name, func(t *testing.T) {
			reported(t, name, func(s *scene) bool {
				held := s.grant(s.client(nil))
				s.be.Advance(testTTL + time.Millisecond)
				select {
				case <-held.Done():
					return held.Err() == nil
				case <-time.After(time.Second): // the expiry timer runs on its own goroutine
					return true
				}
			})
		})
	}
}

// gateHook passes every command of a go-redis client through
// locks.GateRequest, named by the command ("del", "evalsha"; "pipeline"
// for a pipeline), as the backends' own hooks do for the suite.
type gateHook struct{}

func (gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		defer locks.GateRequest(ctx, cmd.Name())()
		return next(ctx, cmd)
	}
}

func (gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		defer locks.GateRequest(ctx, "pipeline")()
		return next(ctx, cmds)
	}
}

// gateAt is a locks.Gate that runs f, once, just before the first request
// named in names that comes after a request named after (at once if after
// is ""): the client stalls there while f acts.
type gateAt struct {
	after string
	names []string
	f     func()

	mu     sync.Mutex
	primed bool
	once   sync.Once
}

func (g *gateAt) Request(_ context.Context, what string) func() {
	g.mu.Lock()
	ready := g.primed || g.after == ""
	g.primed = g.primed || what == g.after
	g.mu.Unlock()
	if ready && slices.Contains(g.names, what) {
		g.once.Do(g.f)
	}
	return nil
}

// stallAt returns a context whose requests stall, at the first one named
// in names after one named after, while f runs.
func stallAt(f func(), after string, names ...string) context.Context {
	return locks.WithGate(context.Background(), &gateAt{after: after, names: names, f: f})
}

// gated returns a client of s whose Redis commands pass the Gate.
func (s *scene) gated() locks.Locker {
	s.t.Helper()
	l := s.client(nil)
	var c redis.UniversalClient
	switch l := l.(type) {
	case *flawedLocker:
		c = l.client
	case *stampLocker:
		c = l.client
	case *flawedSemaphore:
		c = l.client
	case propertytest.ReadWriteLocker:
		c = l.RLocker().(*rwMode).rw.client
	default:
		s.t.Fatalf("no Redis client in %T", l)
	}
	c.AddHook(gateHook{})
	return l
}

// Class 1: one operation stalled between two of its requests while time
// passes and other clients act.
func TestStalledBetweenRequests(t *testing.T) {
	t.Run("unlock-get-then-del", func(t *testing.T) {
		// The Unlock stalls before the request that deletes (DEL, or the
		// owner-checked script) until the key expired and went to b; then
		// a third client must be refused.
		reported(t, "unlock-get-then-del", func(s *scene) bool {
			a := s.gated()
			held := s.grant(a)
			var next locks.Lease
			ctx := stallAt(func() {
				s.be.Advance(testTTL + time.Millisecond)
				next = s.grant(s.client(nil))
			}, "", "del", "evalsha", "eval")
			_ = held.Unlock(ctx)
			_, err := s.client(nil).TryLock(context.Background())
			return err == nil && s.holds(next)
		})
	})
	t.Run("expired-takeover-get-then-set", func(t *testing.T) {
		// Two clients find the same expired value; b stalls before its
		// takeover while c takes the lock over: b must then be refused.
		reported(t, "expired-takeover-get-then-set", func(s *scene) bool {
			s.grant(s.client(nil))
			s.be.Advance(testTTL + time.Millisecond)
			var other locks.Lease
			ctx := stallAt(func() { other = s.grant(s.client(nil)) }, "get", "evalsha", "eval")
			lease, err := s.gated().TryLock(ctx)
			return err == nil && s.holds(lease) && s.holds(other)
		})
	})
}

// Class 2 with class 1's stall: the acquisition stalls before its last
// request (the listing that shows its node first) while time passes; just
// before the holder's deadline, another client must still be refused.
func TestStalledAcquisitionDeadline(t *testing.T) {
	reported(t, "deadline-from-reply", func(s *scene) bool {
		held, err := s.client(nil).TryLock(stallAt(func() { s.be.Advance(testTTL / 2) }, "", "seq children"))
		if err != nil {
			t.Fatalf("TryLock: %v", err)
		}
		s.be.Advance(held.Deadline().Sub(s.be.Clock.Now()) - time.Millisecond)
		_, err = s.client(nil).TryLock(context.Background())
		return err == nil && s.holds(held)
	})
}
