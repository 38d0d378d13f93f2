package adapter_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest/adapter"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const ttl = 10 * time.Second

// valid is how long a lease granted by a request sent at t stays valid by
// lockproof's rule.
var valid = ttl - locks.Drift(ttl)

// toyOptions are the options of a toy client on clock: watchdog off, as
// the suite sets them.
func toyOptions(t *testing.T, clock locks.Clock, extra ...locks.Option) locks.Options {
	t.Helper()
	o, err := locks.Resolve("", append([]locks.Option{locks.WithClock(clock), locks.WithTTL(ttl), locks.WithWatchdog(false)}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// toySetup returns a manual clock at epoch and a toy server on it.
func toySetup() (*fakes.Clock, *toyServer) {
	clock := fakes.NewClock(epoch)
	return clock, newToyServer(clock, ttl)
}

// secondSet is the toy poller's would-wait request: a second SET.
func secondSet(sent []string, next string) bool {
	return next == "toy SET" && slices.Contains(sent, "toy SET")
}

// isSet names the toy's granting request.
func isSet(what string) bool { return what == "toy SET" }

// toyLocker is the kit's Locker for owner on s; edit adjusts the Lock.
func toyLocker(t *testing.T, s *toyServer, o locks.Options, owner string, edit func(*adapter.Lock, *toyClient)) locks.Locker {
	t.Helper()
	c := &toyClient{s: s, owner: owner}
	lk := adapter.Lock{Lock: c.lock, TryLock: editGrant(nil)(c)}
	if edit != nil {
		edit(&lk, c)
	}
	l, err := adapter.New("toy", o, lk)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// editGrant returns the toy's TryLock, its refusal wrapped with Locked,
// with f (if not nil) applied to each grant.
func editGrant(f func(*adapter.Grant)) func(*toyClient) func(context.Context) (adapter.Grant, error) {
	return func(c *toyClient) func(context.Context) (adapter.Grant, error) {
		return func(ctx context.Context) (adapter.Grant, error) {
			g, err := c.tryLock(ctx)
			switch {
			case errors.Is(err, errToyTaken):
				return g, adapter.Locked("toy", err)
			case err == nil && f != nil:
				f(&g)
			}
			return g, err
		}
	}
}

// withGrant is an edit for toyLocker: its TryLock applies f to each grant.
func withGrant(f func(*adapter.Grant)) func(*adapter.Lock, *toyClient) {
	return func(lk *adapter.Lock, c *toyClient) { lk.TryLock = editGrant(f)(c) }
}

// recordingGate is an outer Gate that records what it lets go, and tells
// of each request on seen.
type recordingGate struct {
	mu   sync.Mutex
	let  []string
	seen chan string
}

func (g *recordingGate) Request(_ context.Context, what string) func() {
	g.mu.Lock()
	g.let = append(g.let, what)
	g.mu.Unlock()
	if g.seen != nil {
		g.seen <- what
	}
	return func() {}
}

func (g *recordingGate) names() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.let)
}

// A lease's Deadline counts from the moment the call began, read before
// its request went out, not from when the library returned; a renewal's
// from the moment Renew was called.
func TestDeadlineFromTheCall(t *testing.T) {
	clock, s := toySetup()
	s.during = func() { clock.Advance(time.Second) } // each request takes a second
	l := toyLocker(t, s, toyOptions(t, clock), "a", nil)
	ctx := context.Background()
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lease.Deadline(), epoch.Add(valid); !got.Equal(want) {
		t.Fatalf("Deadline %v, want the call's start + TTL - drift %v", got, want)
	}
	clock.Advance(3 * time.Second)
	renewCalled := clock.Now()
	if err := lease.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := lease.Deadline(), renewCalled.Add(valid); !got.Equal(want) {
		t.Fatalf("Deadline after Renew %v, want the renewal's start + TTL - drift %v", got, want)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// With Lock.Grants, a waiter's grant counts from the request that granted
// it (let go when the holder left), not from the start of its wait; with
// Grant.Start, from the moment the library gives.
func TestDeadlineFromTheGrantingRequest(t *testing.T) {
	for _, c := range []struct {
		name   string
		grants func(string) bool
		start  time.Duration // Grant.Start after epoch; 0 for none
		want   time.Duration // the grant's start after epoch
	}{
		{name: "call", want: 0},
		{name: "grants", grants: isSet, want: 5 * time.Second},
		{name: "library start", grants: isSet, start: 4 * time.Second, want: 4 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock, s := toySetup()
			o := toyOptions(t, clock)
			a := toyLocker(t, s, o, "a", nil)
			b := toyLocker(t, s, o, "b", func(lk *adapter.Lock, tc *toyClient) {
				lk.Grants = c.grants
				if c.start > 0 {
					lk.Lock = func(ctx context.Context) (adapter.Grant, error) {
						g, err := tc.lock(ctx)
						g.Start = epoch.Add(c.start)
						return g, err
					}
				}
			})
			ctx := context.Background()
			held, err := a.TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			outer := &recordingGate{seen: make(chan string, 4)}
			type result struct {
				lease locks.Lease
				err   error
			}
			res := make(chan result, 1)
			go func() {
				lease, err := b.Lock(locks.WithGate(ctx, outer))
				res <- result{lease, err}
			}()
			// The gate tells of a request before it goes, so b's first SET
			// is known refused only once b's WAIT comes to the gate.
			for what := range outer.seen {
				if what == "toy WAIT" {
					break
				}
			}
			clock.Advance(5 * time.Second)
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-res
			if r.err != nil {
				t.Fatal(r.err)
			}
			if got, want := r.lease.Deadline(), epoch.Add(c.want+valid); !got.Equal(want) {
				t.Fatalf("Deadline %v, want %v", got, want)
			}
			if err := r.lease.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A library that reports its own deadline gets it as the lease's, earlier
// or later than the kit's rule, at the grant and after each renewal; the
// lease ends when it passes.
func TestLibraryDeadline(t *testing.T) {
	clock := fakes.NewClock(epoch)
	s := newToyServer(clock, time.Minute) // the server keeps a key longer than the kit's rule
	var mu sync.Mutex
	var lib time.Time
	setLib := func(d time.Time) { mu.Lock(); lib = d; mu.Unlock() }
	l := toyLocker(t, s, toyOptions(t, clock), "a", withGrant(func(g *adapter.Grant) {
		g.Deadline = func() time.Time { mu.Lock(); defer mu.Unlock(); return lib }
	}))
	ctx := context.Background()

	setLib(epoch.Add(30 * time.Second)) // later than the kit's rule
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := lease.Deadline(); !got.Equal(epoch.Add(30 * time.Second)) {
		t.Fatalf("Deadline %v, want the library's %v", got, epoch.Add(30*time.Second))
	}
	clock.Advance(20 * time.Second) // past the kit's rule, within the library's
	if err := lease.Err(); err != nil {
		t.Fatalf("within the library's deadline: %v", err)
	}
	setLib(clock.Now().Add(3 * time.Second)) // earlier than the kit's rule
	if err := lease.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := lease.Deadline(), clock.Now().Add(3*time.Second); !got.Equal(want) {
		t.Fatalf("Deadline after Renew %v, want the library's %v", got, want)
	}
	clock.Advance(3 * time.Second)
	<-lease.Done()
	if err := lease.Err(); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("Err %v at the library's deadline, want ErrLeaseExpired", err)
	}
	_ = lease.Unlock(ctx)

	setLib(time.Time{}) // none: the kit's rule
	lease, err = l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lease.Deadline(), clock.Now().Add(valid); !got.Equal(want) {
		t.Fatalf("Deadline %v with no library deadline, want %v", got, want)
	}
	_ = lease.Unlock(ctx)

	setLib(clock.Now()) // passed already: granted, but ended
	lease, err = l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Err(); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("a grant past its deadline: Err %v, want ErrLeaseExpired", err)
	}
	if err := lease.Unlock(ctx); !errors.Is(err, locks.ErrLeaseExpired) || s.holder() != "" {
		t.Fatalf("Unlock of a late grant: %v, holder %q; want ErrLeaseExpired and the key released", err, s.holder())
	}
}

// Without a single attempt, TryLock runs the library's Lock and gives up
// before its first would-wait request (a blocking query, a poller's second
// SET), which never reaches the server nor the outer Gate; a free lock is
// granted.
func TestTryLockFromLock(t *testing.T) {
	for _, c := range []struct {
		name      string
		poll      bool
		wouldWait func([]string, string) bool
	}{
		{"blocking query", false, func(_ []string, next string) bool { return next == "toy WAIT" }},
		{"poller", true, secondSet},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock, s := toySetup()
			o := toyOptions(t, clock)
			a := toyLocker(t, s, o, "a", nil)
			b := toyLocker(t, s, o, "b", func(lk *adapter.Lock, tc *toyClient) {
				tc.poll = c.poll
				lk.TryLock, lk.WouldWait = nil, c.wouldWait
			})
			ctx := context.Background()
			held, err := a.TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			outer := &recordingGate{}
			_, err = b.TryLock(locks.WithGate(ctx, outer))
			if !errors.Is(err, locks.ErrLocked) {
				t.Fatalf("TryLock of a held lock: %v, want ErrLocked", err)
			}
			if n := s.setCount(); n != 2 {
				t.Fatalf("%d SETs reached the server, want 2 (a's, and b's first)", n)
			}
			if got := outer.names(); !slices.Equal(got, []string{"toy SET"}) {
				t.Fatalf("the outer gate let go %q, want b's first SET alone", got)
			}
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			lease, err := b.TryLock(locks.WithGate(ctx, outer))
			if err != nil || s.holder() != "b" {
				t.Fatalf("TryLock of a free lock: %v, holder %q", err, s.holder())
			}
			if got := outer.names(); !slices.Equal(got, []string{"toy SET", "toy SET"}) {
				t.Fatalf("the outer gate let go %q", got)
			}
			if err := lease.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A library whose Lock returns a grant although the attempt was given up
// did hold the lock: TryLock releases it and reports no refusal.
func TestTryLockFromLockGrantedAsItGaveUp(t *testing.T) {
	clock, s := toySetup()
	l := toyLocker(t, s, toyOptions(t, clock), "a", func(lk *adapter.Lock, c *toyClient) {
		lk.TryLock = nil
		lk.WouldWait = func(_ []string, next string) bool { return next == "toy PING" }
		lk.Lock = func(ctx context.Context) (adapter.Grant, error) {
			g, err := c.tryLock(ctx)
			_ = s.request(ctx, "toy PING", func() error { return nil }) // its error ignored
			return g, err
		}
	})
	_, err := l.TryLock(context.Background())
	if err == nil || errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock: %v, want an error that is no refusal", err)
	}
	if h := s.holder(); h != "" {
		t.Fatalf("the grant was not released: holder %q", h)
	}
}

// Locked and NotHeld keep the library's error in the chain; the kit maps
// a renewal's NotHeld to the end of the lease.
func TestErrorMapping(t *testing.T) {
	for _, c := range []struct {
		err      error
		sentinel error
		lib      error
	}{
		{adapter.Locked("toy", errToyTaken), locks.ErrLocked, errToyTaken},
		{adapter.NotHeld("toy", errToyNotOwner), locks.ErrNotHeld, errToyNotOwner},
		{adapter.Locked("toy", nil), locks.ErrLocked, nil},
	} {
		if !errors.Is(c.err, c.sentinel) || (c.lib != nil && !errors.Is(c.err, c.lib)) {
			t.Errorf("%v: not %v and %v", c.err, c.sentinel, c.lib)
		}
	}
	if errors.Is(adapter.Locked("toy", errToyTaken), locks.ErrNotHeld) {
		t.Error("Locked is also ErrNotHeld")
	}

	clock, s := toySetup()
	o := toyOptions(t, clock)
	l := toyLocker(t, s, o, "a", withGrant(func(g *adapter.Grant) {
		g.Renew = func(ctx context.Context) error {
			if err := s.renew(ctx, "a"); errors.Is(err, errToyNotOwner) {
				return adapter.NotHeld("toy", err)
			}
			return nil
		}
	}))
	ctx := context.Background()
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(ttl) // the server frees the key at its expiry; the lease ends first
	other := toyLocker(t, s, o, "b", nil)
	if _, err := other.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx); !errors.Is(err, locks.ErrLocked) || !errors.Is(err, errToyTaken) {
		t.Fatalf("TryLock of a held lock: %v, want ErrLocked wrapping the library's error", err)
	}
	if err := lease.Renew(ctx); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("Renew past the deadline: %v, want ErrLeaseExpired", err)
	}
}

// A renewal the library answers "not held" ends the lease.
func TestRenewNotHeldEndsTheLease(t *testing.T) {
	clock, s := toySetup()
	l := toyLocker(t, s, toyOptions(t, clock), "a", withGrant(func(g *adapter.Grant) {
		g.Renew = func(context.Context) error { return adapter.NotHeld("toy", errToyNotOwner) }
	}))
	ctx := context.Background()
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Renew(ctx); !errors.Is(err, locks.ErrNotHeld) || !errors.Is(err, errToyNotOwner) {
		t.Fatalf("Renew: %v, want ErrNotHeld wrapping the library's error", err)
	}
	<-lease.Done()
	if err := lease.Err(); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Err %v, want ErrNotHeld", err)
	}
	_ = lease.Unlock(ctx)
}

// Past its deadline a lease refuses Renew without asking the library;
// Unlock still releases through it and reports the expiry; a second
// Unlock is ErrReleased; a library without renewal says so.
func TestLeaseRules(t *testing.T) {
	clock, s := toySetup()
	var renews, releases int
	l := toyLocker(t, s, toyOptions(t, clock), "a", withGrant(func(g *adapter.Grant) {
		renew, release := g.Renew, g.Release
		g.Renew = func(ctx context.Context) error { renews++; return renew(ctx) }
		g.Release = func(ctx context.Context) error { releases++; return release(ctx) }
	}))
	ctx := context.Background()
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(valid)
	if err := lease.Renew(ctx); !errors.Is(err, locks.ErrLeaseExpired) || renews != 0 {
		t.Fatalf("Renew at the deadline: %v after %d library renewals; want ErrLeaseExpired and none", err, renews)
	}
	if err := lease.Unlock(ctx); !errors.Is(err, locks.ErrLeaseExpired) || releases != 1 || s.holder() != "" {
		t.Fatalf("Unlock past the deadline: %v, %d releases, holder %q; want ErrLeaseExpired, one, none", err, releases, s.holder())
	}
	if err := lease.Unlock(ctx); !errors.Is(err, locks.ErrReleased) || releases != 1 {
		t.Fatalf("second Unlock: %v, %d releases; want ErrReleased, one", err, releases)
	}

	norenew := toyLocker(t, s, toyOptions(t, clock), "b", withGrant(func(g *adapter.Grant) {
		g.Renew = nil
	}))
	lease, err = norenew.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Renew(ctx); !errors.Is(err, adapter.ErrNoRenew) {
		t.Fatalf("Renew without a library renewal: %v, want ErrNoRenew", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// When the library reports the lock lost, Done closes and Err wraps
// ErrNotHeld.
func TestLostChannel(t *testing.T) {
	clock, s := toySetup()
	lost := make(chan struct{})
	l := toyLocker(t, s, toyOptions(t, clock), "a", withGrant(func(g *adapter.Grant) {
		g.Lost = lost
	}))
	ctx := context.Background()
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("Err %v before the loss", err)
	}
	close(lost)
	<-lease.Done()
	if err := lease.Err(); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Err %v after the loss, want ErrNotHeld", err)
	}
	if err := lease.Unlock(ctx); !errors.Is(err, locks.ErrNotHeld) || s.holder() != "" {
		t.Fatalf("Unlock of a lost lease: %v, holder %q; want ErrNotHeld, the release sent", err, s.holder())
	}
}

// A Lock cut short by its context reports the context's error, whatever
// the library said.
func TestCancelledLockWrapsTheContext(t *testing.T) {
	clock, s := toySetup()
	errFailed := errors.New("toy: failed to acquire")
	l := toyLocker(t, s, toyOptions(t, clock), "a", func(lk *adapter.Lock, _ *toyClient) {
		lk.Lock = func(ctx context.Context) (adapter.Grant, error) {
			<-ctx.Done()
			return adapter.Grant{}, errFailed
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Lock(ctx); !errors.Is(err, context.Canceled) || !errors.Is(err, errFailed) {
		t.Fatalf("Lock: %v, want context.Canceled and the library's error", err)
	}
}

// The kit reports PointAcquired before it returns a grant, and the
// lease's points before a renewal and an unlock.
func TestObserverPoints(t *testing.T) {
	clock, s := toySetup()
	var points []locks.Point
	obs := locks.ObserverFunc(func(_ context.Context, e locks.Event) { points = append(points, e.Point) })
	l := toyLocker(t, s, toyOptions(t, clock, locks.WithObserver(obs)), "a", nil)
	ctx := context.Background()
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = lease.Renew(ctx)
	_ = lease.Unlock(ctx)
	want := []locks.Point{locks.PointAcquired, locks.PointBeforeRenew, locks.PointBeforeUnlock}
	if !slices.Equal(points, want) {
		t.Fatalf("points %v, want %v", points, want)
	}
}

// New refuses what it cannot honour, with an error.
func TestNewRefuses(t *testing.T) {
	clock := fakes.NewClock(epoch)
	o := toyOptions(t, clock)
	lockOnly := func(context.Context) (adapter.Grant, error) { return adapter.Grant{}, nil }
	watchdog := o
	watchdog.Watchdog = true
	maxHold := o
	maxHold.MaxHold = time.Minute
	for name, c := range map[string]struct {
		o  locks.Options
		lk adapter.Lock
	}{
		"no Lock":             {o, adapter.Lock{TryLock: lockOnly}},
		"no TryLock":          {o, adapter.Lock{Lock: lockOnly}},
		"unresolved options":  {locks.Options{}, adapter.Lock{Lock: lockOnly, TryLock: lockOnly}},
		"watchdog":            {watchdog, adapter.Lock{Lock: lockOnly, TryLock: lockOnly}},
		"max hold":            {maxHold, adapter.Lock{Lock: lockOnly, TryLock: lockOnly}},
		"would wait, no Lock": {o, adapter.Lock{WouldWait: secondSet}},
	} {
		if l, err := adapter.New("toy", c.o, c.lk); err == nil {
			t.Errorf("%s: New gave %v, want an error", name, l)
		}
	}
	l, err := adapter.New("toy", o, adapter.Lock{Lock: lockOnly})
	if err == nil {
		t.Fatalf("New without TryLock nor WouldWait gave %v", l)
	}
	if _, err := adapter.New("toy", o, adapter.Lock{Lock: lockOnly, WouldWait: secondSet}); err != nil {
		t.Fatal(err)
	}
}

// A grant without Release is refused with an error.
func TestGrantWithoutRelease(t *testing.T) {
	clock := fakes.NewClock(epoch)
	none := func(context.Context) (adapter.Grant, error) { return adapter.Grant{}, nil }
	l, err := adapter.New("toy", toyOptions(t, clock), adapter.Lock{Lock: none, TryLock: none})
	if err != nil {
		t.Fatal(err)
	}
	if lease, err := l.TryLock(context.Background()); err == nil {
		t.Fatalf("TryLock gave %v", lease)
	}
}

// plainLocker is a Locker without RLocker; rwLocker has one.
type plainLocker struct{ locks.Locker }

type rwLocker struct {
	locks.Locker
	reader locks.Locker
}

func (l rwLocker) RLocker() locks.Locker { return l.reader }

// WithCrash adds Crash, which calls the hook once, and keeps RLocker when
// the wrapped Locker has one.
func TestWithCrash(t *testing.T) {
	type crasher interface{ Crash() }
	type reader interface{ RLocker() locks.Locker }
	crashes := 0
	hook := func() { crashes++ }

	plain := adapter.WithCrash(plainLocker{}, hook)
	c, ok := plain.(crasher)
	if !ok {
		t.Fatal("no Crash method")
	}
	if _, ok := plain.(reader); ok {
		t.Fatal("an RLocker method the wrapped Locker has not")
	}
	c.Crash()
	c.Crash()
	if crashes != 1 {
		t.Fatalf("the hook ran %d times, want once", crashes)
	}

	inner := plainLocker{}
	rw := adapter.WithCrash(rwLocker{reader: inner}, hook)
	r, ok := rw.(reader)
	if !ok {
		t.Fatal("the RLocker method was lost")
	}
	if r.RLocker() != locks.Locker(inner) {
		t.Fatal("RLocker is not the wrapped Locker's")
	}
	rw.(crasher).Crash()
	if crashes != 2 {
		t.Fatalf("the hook ran %d times in all, want twice", crashes)
	}

	if got := adapter.WithCrash(plain, nil); got != plain {
		t.Fatal("a nil hook changed the Locker")
	}
}

// KeepAlive renews every period of the clock until stopped, and stop
// returns when the last successful renewal began.
func TestKeepAlive(t *testing.T) {
	clock := fakes.NewClock(epoch)
	ctx := context.Background()
	results := make(chan error, 1)
	calls := make(chan time.Time)
	stop := adapter.KeepAlive(clock, time.Second, epoch, func() error {
		calls <- clock.Now()
		return <-results
	})
	for i, res := range []error{nil, errors.New("toy: renewal failed")} {
		if err := clock.WaitTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		if at := <-calls; !at.Equal(epoch.Add(time.Duration(i+1) * time.Second)) {
			t.Fatalf("renewal %d at %v", i, at)
		}
		results <- res
	}
	if err := clock.WaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if last := stop(); !last.Equal(epoch.Add(time.Second)) {
		t.Fatalf("stop returned %v, want the first renewal's %v", last, epoch.Add(time.Second))
	}
	if last := stop(); !last.Equal(epoch.Add(time.Second)) {
		t.Fatalf("a second stop returned %v", last)
	}
}

// A lease is over the instant its clock reaches the deadline: Err says so
// and Done is closed by then, before the expiry timer has run (the clock's
// callbacks are held back here).
func TestErrAtDeadlineBeforeTimer(t *testing.T) {
	clock, s := toySetup()
	var held []func()
	clock.SetDispatch(func(fs []func()) { held = append(held, fs...) })
	lease, err := toyLocker(t, s, toyOptions(t, clock), "a", nil).TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(valid - time.Nanosecond)
	if err := lease.Err(); err != nil {
		t.Fatalf("a nanosecond before the deadline: Err = %v", err)
	}
	clock.Advance(time.Nanosecond)
	err = lease.Err()
	select {
	case <-lease.Done():
	default:
		t.Errorf("Done open at the deadline (Err = %v)", err)
	}
	if !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("at the deadline, expiry timer not run: Err = %v, want ErrLeaseExpired", err)
	}
	for _, f := range held {
		f()
	}
	if again := lease.Err(); again != err {
		t.Fatalf("Err changed once the timer ran: %v, then %v", err, again)
	}
	_ = lease.Unlock(context.Background())
}
