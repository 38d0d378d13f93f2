package locktest_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// failures is a testing.TB that records a helper's failure instead of
// failing the test, so that a check can be run on a lock known bad.
type failures struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *failures) Helper() {}

func (f *failures) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *failures) Fatal(args ...any) { f.Fatalf("%v", args...) }

// run runs check on a recording TB in a goroutine of its own (Fatalf ends
// it) and returns the failure, "" when it passed.
func run(t *testing.T, check func(testing.TB)) string {
	f := &failures{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.msg
}

// caught fails the test unless a check run on a lock known bad failed.
func caught(t *testing.T, bad, msg string) {
	t.Helper()
	if msg == "" {
		t.Fatalf("%s passed the check", bad)
	}
	t.Logf("%s: %s", bad, msg)
}

// memLock is a lock in memory for the checks' own tests: leases from
// locks.NewLease, re-entry from locks.Reentry, as fakes.MemLock has them
// (this package's tests do not import fakes, whose servers would add
// seconds to its test binary's start). keep makes its release do nothing.
type memLock struct {
	opt     locks.Options
	reentry *locks.Reentry
	keep    bool
	mu      sync.Mutex
	holder  int // the holder's grant, 0 when free
	grants  int
}

func newMemLock(t *testing.T, clock locks.Clock, opts ...locks.Option) *memLock {
	t.Helper()
	o, err := locks.Resolve("p:", append([]locks.Option{locks.WithClock(clock), locks.WithTTL(3 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return &memLock{opt: o, reentry: locks.NewReentry(o)}
}

func (m *memLock) Lock(ctx context.Context) (locks.Lease, error) { return m.TryLock(ctx) }

func (m *memLock) TryLock(ctx context.Context) (locks.Lease, error) {
	return m.reentry.Acquire(ctx, true, func(context.Context) (locks.Lease, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.holder != 0 {
			return nil, locks.ErrLocked
		}
		m.grants++
		m.holder = m.grants
		spec := locks.LeaseSpec{Name: "x", Token: locks.Token(m.grants), Fenced: true, Start: m.opt.Clock.Now()}
		return locks.NewLease(spec, memOps{m: m, grant: m.grants}, m.opt), nil
	})
}

type memOps struct {
	m     *memLock
	grant int
}

func (o memOps) Renew(context.Context) error {
	o.m.mu.Lock()
	defer o.m.mu.Unlock()
	if o.m.holder != o.grant {
		return locks.ErrNotHeld
	}
	return nil
}

func (o memOps) Release(context.Context) error {
	o.m.mu.Lock()
	defer o.m.mu.Unlock()
	if o.m.holder != o.grant {
		return locks.ErrNotHeld
	}
	if !o.m.keep {
		o.m.holder = 0
	}
	return nil
}

// clock is a manual clock whose timers fire, each in a goroutine of its
// own, when Advance passes them.
type clock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*timer]struct{}
}

type timer struct {
	c  *clock
	at time.Time
	f  func()
}

func newClock() *clock { return &clock{now: epoch, timers: map[*timer]struct{}{}} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) NewTimer(time.Duration) locks.Timer { panic("locktest: the checks start no NewTimer") }

func (c *clock) AfterFunc(d time.Duration, f func()) locks.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, at: c.now.Add(d), f: f}
	c.timers[t] = struct{}{}
	return t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*timer
	for t := range c.timers {
		if !t.at.After(c.now) {
			due = append(due, t)
			delete(c.timers, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		go t.f()
	}
}

func (t *timer) C() <-chan time.Time { return nil }

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, ok := t.c.timers[t]
	delete(t.c.timers, t)
	return ok
}

func TestMaxHoldCheck(t *testing.T) {
	c := newClock()
	good := newMemLock(t, c, locks.WithMaxHold(time.Second))
	if msg := run(t, func(tb testing.TB) { locktest.MaxHold(tb, c, c.Advance, time.Second, good) }); msg != "" {
		t.Fatalf("a lock with WithMaxHold: %s", msg)
	}
	without := newMemLock(t, c)
	caught(t, "a lock without WithMaxHold", run(t, func(tb testing.TB) { locktest.MaxHold(tb, c, c.Advance, time.Second, without) }))
	kept := newMemLock(t, c, locks.WithMaxHold(time.Second))
	kept.keep = true
	caught(t, "a lock whose max hold releases nothing", run(t, func(tb testing.TB) { locktest.MaxHold(tb, c, c.Advance, time.Second, kept) }))
	c.Advance(time.Hour) // end the leases the failed checks left
}

func TestReentrantCheck(t *testing.T) {
	c := newClock()
	good := newMemLock(t, c, locks.WithOwner("job-7"))
	if msg := run(t, func(tb testing.TB) { locktest.Reentrant(tb, good) }); msg != "" {
		t.Fatalf("a lock with WithOwner: %s", msg)
	}
	without := newMemLock(t, c)
	caught(t, "a lock without WithOwner", run(t, func(tb testing.TB) { locktest.Reentrant(tb, without) }))
	shared := &sharedLease{inner: newMemLock(t, c)}
	caught(t, "a re-entry without a hold count", run(t, func(tb testing.TB) { locktest.Reentrant(tb, shared) }))
	c.Advance(time.Hour)
}

// sharedLease re-enters by handing out the same lease again: no count, so
// the first Unlock frees the lock under the other holds.
type sharedLease struct {
	inner locks.Locker
	mu    sync.Mutex
	lease locks.Lease
}

func (s *sharedLease) Lock(ctx context.Context) (locks.Lease, error) { return s.TryLock(ctx) }

func (s *sharedLease) TryLock(ctx context.Context) (locks.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease != nil && s.lease.Err() == nil {
		return s.lease, nil
	}
	l, err := s.inner.TryLock(ctx)
	if err == nil {
		s.lease = l
	}
	return l, err
}

// alwaysGrant grants every TryLock and Lock: no lock at all.
type alwaysGrant struct{ m *memLock }

func (a alwaysGrant) Lock(ctx context.Context) (locks.Lease, error) { return a.TryLock(ctx) }

func (a alwaysGrant) TryLock(context.Context) (locks.Lease, error) {
	spec := locks.LeaseSpec{Name: "x", Token: 1, Fenced: true, Start: a.m.opt.Clock.Now()}
	return locks.NewLease(spec, memOps{m: a.m}, a.m.opt), nil
}

func TestAtMostPermits(t *testing.T) {
	m := newMemLock(t, locks.SystemClock{})
	if most := locktest.AtMostPermits(t, 1, []locks.Locker{m, m}, 2, 10, time.Millisecond); most != 1 {
		t.Errorf("a mutex: at most %d inside at once, want 1", most)
	}
	bad := alwaysGrant{m: newMemLock(t, locks.SystemClock{})}
	caught(t, "a lock that grants everyone", run(t, func(tb testing.TB) {
		locktest.AtMostPermits(tb, 2, []locks.Locker{bad}, 4, 10, 5*time.Millisecond)
	}))
}
