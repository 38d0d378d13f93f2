package locks_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
)

// grants is a backend for Reentry: every call of acquire is one grant on
// the backend, with the next token.
type grants struct {
	t       *testing.T
	clock   *fakes.Clock
	o       locks.Options
	mu      sync.Mutex
	n       int
	ops     []*scriptedOps
	gate    chan struct{} // when set, acquire signals entered, then waits for it
	entered chan struct{}
}

func (g *grants) acquire(ctx context.Context) (locks.Lease, error) {
	if g.gate != nil {
		g.entered <- struct{}{}
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	ops := newOps()
	g.ops = append(g.ops, ops)
	return locks.NewLease(locks.LeaseSpec{Name: "x", Token: locks.Token(g.n), Fenced: true, Start: g.clock.Now()}, ops, g.o), nil
}

func (g *grants) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

func newGrants(t *testing.T, opts ...locks.Option) (*grants, *locks.Reentry) {
	clock := fakes.NewClock(epoch)
	g := &grants{t: t, clock: clock, o: options(t, clock, append([]locks.Option{locks.WithWatchdog(false)}, opts...)...)}
	return g, locks.NewReentry(g.o)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestReentryWithoutOwnerAcquiresEachTime(t *testing.T) {
	g, r := newGrants(t)
	if r != nil {
		t.Fatal("NewReentry without an owner must be nil")
	}
	ctx := context.Background()
	for range 2 {
		l, err := r.Acquire(ctx, false, g.acquire)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
	}
	if g.count() != 2 || r.Holds() != 0 {
		t.Fatalf("%d grants, %d holds; want 2 and 0", g.count(), r.Holds())
	}
}

// TestReentryCountsHolds: two holds share one grant and its token; the
// first Unlock ends only its hold, the second releases the lock, and the
// next acquisition is a new grant.
func TestReentryCountsHolds(t *testing.T) {
	g, r := newGrants(t, locks.WithOwner("job-7"))
	ctx := context.Background()
	h1, err := r.Acquire(ctx, false, g.acquire)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := r.Acquire(ctx, true, g.acquire)
	if err != nil {
		t.Fatal(err)
	}
	t1, _ := h1.Token()
	t2, _ := h2.Token()
	if g.count() != 1 || t1 != t2 || r.Holds() != 2 {
		t.Fatalf("%d grants, tokens %v and %v, %d holds; want 1 grant, one token, 2 holds", g.count(), t1, t2, r.Holds())
	}
	if err := h1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, releases := g.ops[0].count(); releases != 0 || r.Holds() != 1 {
		t.Fatalf("first Unlock: %d releases, %d holds; want 0 and 1", releases, r.Holds())
	}
	if !isClosed(h1.Done()) || !errors.Is(h1.Err(), locks.ErrReleased) || isClosed(h2.Done()) || h2.Err() != nil {
		t.Fatalf("after the first Unlock: h1 %v, h2 %v", h1.Err(), h2.Err())
	}
	if err := h1.Unlock(ctx); !errors.Is(err, locks.ErrReleased) {
		t.Fatalf("second Unlock of one hold = %v, want ErrReleased", err)
	}
	if err := h1.Renew(ctx); !errors.Is(err, locks.ErrReleased) {
		t.Fatalf("Renew of an unlocked hold = %v", err)
	}
	if r.Holds() != 1 {
		t.Fatalf("a double Unlock changed the count to %d", r.Holds())
	}
	if err := h2.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, releases := g.ops[0].count(); releases != 1 || r.Holds() != 0 {
		t.Fatalf("last Unlock: %d releases, %d holds; want 1 and 0", releases, r.Holds())
	}
	h3, err := r.Acquire(ctx, true, g.acquire)
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := h3.Token(); g.count() != 2 || tok != 2 {
		t.Fatalf("after the release: %d grants, token %v; want a new grant, token 2", g.count(), tok)
	}
	_ = h3.Unlock(ctx)
}

// TestReentryAfterExpiry: the grant's expiry closes every hold's Done; the
// owner's next acquisition is a new grant, and an old hold's Unlock
// reports the expiry without touching the new one.
func TestReentryAfterExpiry(t *testing.T) {
	g, r := newGrants(t, locks.WithOwner("job-7"))
	ctx := context.Background()
	h1, _ := r.Acquire(ctx, false, g.acquire)
	h2, _ := r.Acquire(ctx, false, g.acquire)
	g.clock.Advance(3 * time.Second)
	<-h1.Done()
	<-h2.Done()
	if !errors.Is(h2.Err(), locks.ErrLeaseExpired) {
		t.Fatalf("Err = %v", h2.Err())
	}
	h3, err := r.Acquire(ctx, true, g.acquire)
	if err != nil {
		t.Fatal(err)
	}
	if g.count() != 2 || r.Holds() != 1 {
		t.Fatalf("%d grants, %d holds; want 2 and 1", g.count(), r.Holds())
	}
	if err := h1.Unlock(ctx); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("Unlock of an expired hold = %v", err)
	}
	if err := h2.Unlock(ctx); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("last Unlock of an expired grant = %v", err)
	}
	if _, releases := g.ops[0].count(); releases != 1 {
		t.Fatalf("the expired grant got %d releases, want its owner-checked one", releases)
	}
	if _, releases := g.ops[1].count(); releases != 0 || h3.Err() != nil {
		t.Fatalf("the old holds touched the new grant: %d releases, %v", releases, h3.Err())
	}
	_ = h3.Unlock(ctx)
}

// TestReentryWhileAcquiring: while the owner's Lock waits on the backend, a
// TryLock of the owner returns ErrLocked and a second Lock waits, then
// enters the grant the first one got.
func TestReentryWhileAcquiring(t *testing.T) {
	g, r := newGrants(t, locks.WithOwner("job-7"))
	g.gate, g.entered = make(chan struct{}), make(chan struct{}, 1)
	ctx := context.Background()
	type result struct {
		l   locks.Lease
		err error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() { l, err := r.Acquire(ctx, false, g.acquire); first <- result{l, err} }()
	<-g.entered
	if _, err := r.Acquire(ctx, true, g.acquire); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock while the owner's Lock is on its way = %v, want ErrLocked", err)
	}
	go func() { l, err := r.Acquire(ctx, false, g.acquire); second <- result{l, err} }()
	close(g.gate)
	a, b := <-first, <-second
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	if g.count() != 1 || r.Holds() != 2 {
		t.Fatalf("%d grants, %d holds; want 1 and 2", g.count(), r.Holds())
	}
	_ = a.l.Unlock(ctx)
	_ = b.l.Unlock(ctx)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	g2, r2 := newGrants(t, locks.WithOwner("job-8"))
	g2.gate, g2.entered = make(chan struct{}), make(chan struct{}, 1)
	if _, err := r2.Acquire(cctx, false, g2.acquire); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with an ended ctx = %v", err)
	}
}

// plainLease is a Lease that is not a *locks.ManagedLease.
type plainLease struct{ locks.Lease }

func TestReentryNeedsManagedLease(t *testing.T) {
	g, r := newGrants(t, locks.WithOwner("job-7"))
	var inner locks.Lease
	_, err := r.Acquire(context.Background(), false, func(ctx context.Context) (locks.Lease, error) {
		l, err := g.acquire(ctx)
		inner = l
		return plainLease{l}, err
	})
	if !errors.Is(err, locks.ErrInvalidOption) {
		t.Fatalf("Acquire = %v, want ErrInvalidOption", err)
	}
	if !errors.Is(inner.Err(), locks.ErrReleased) {
		t.Fatalf("the refused grant was not unlocked: %v", inner.Err())
	}
}

func TestWithOwnerValidated(t *testing.T) {
	for _, c := range []struct {
		id string
		ok bool
	}{{"job-7", true}, {"", false}, {"a\nb", false}, {"\xff", false}, {strings.Repeat("x", locks.MaxNameLen+1), false}} {
		o, err := locks.Resolve("p:", locks.WithOwner(c.id))
		if c.ok && (err != nil || o.Owner != c.id) {
			t.Errorf("WithOwner(%q): %v", c.id, err)
		}
		if !c.ok && !errors.Is(err, locks.ErrInvalidOption) {
			t.Errorf("WithOwner(%q) = %v, want ErrInvalidOption", c.id, err)
		}
	}
}
