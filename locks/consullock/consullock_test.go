package consullock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// TestExclusionThroughFence: 16 goroutines in 4 "processes" (each its own
// client and Locker) × 50 acquisitions, each a read-modify-write through a
// Fence. No update may be lost and no access refused.
func TestExclusionThroughFence(t *testing.T) {
	c := server(t)
	const procs, perProc, rounds = 4, 4, 50
	var fence locks.Fence[int]
	var inside atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, procs*perProc)
	for p := 0; p < procs; p++ {
		l := newLocker(t, c, c.NewClient(), "counter", Session{LockDelay: DefaultLockDelay(locks.DefaultTTL)})
		for g := 0; g < perProc; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- locktest.FencedIncrements(l, &fence, &inside, rounds, time.Minute)
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, want := fence.Value(), procs*perProc*rounds; got != want {
		t.Fatalf("counter = %d, want %d: lost updates", got, want)
	}
	if s := fence.Stats(); s.Rejected != 0 {
		t.Fatalf("fence rejected %d stale accesses", s.Rejected)
	}
	if c.Miniconsul() != nil {
		if left := c.Miniconsul().Sessions(); len(left) != 0 {
			t.Fatalf("%d sessions left after every unlock", len(left))
		}
	}
}

// TestSessionDestroyedUnderHolder: the holder's session is invalidated on
// the server. Done closes at once (the clock does not move: well within the
// TTL); the waiter acquires only after the lock-delay; the stale holder's
// fenced write is refused; the same Locker can acquire again.
func TestSessionDestroyedUnderHolder(t *testing.T) {
	c := server(t)
	const delay = 2 * time.Second
	l := newLocker(t, c, nil, "job", Session{LockDelay: delay})
	waiter := newLocker(t, c, c.NewClient(), "job", Session{LockDelay: delay})
	var fence locks.Fence[string]

	old := mustLock(t, l)
	oldTok := token(t, old)
	if err := fence.Write(oldTok, "old"); err != nil {
		t.Fatal(err)
	}
	type acquired struct {
		lease locks.Lease
		at    time.Time
	}
	got := make(chan acquired, 1)
	go func() {
		lease := mustLock(t, waiter)
		got <- acquired{lease, time.Now()}
	}()
	sess, idx := holder(t, c, l)
	c.WaitParked(l.Key(), idx, 2) // the holder's monitor and the waiter
	if c.Miniconsul() == nil {
		// A real agent does not show parked queries: wait for the
		// waiter's queue entry, written after its first try failed. A try
		// still in flight at the invalidation could win: Consul checks the
		// lock-delay before the Raft apply, not in it.
		waitUntil(t, "the waiter's queue entry", func() bool {
			pairs, _, err := c.Client().KV().List(l.queuePrefix(), nil)
			return err == nil && len(pairs) > 0
		})
	}

	began := time.Now()
	if err := c.ExpireSession(sess); err != nil {
		t.Fatal(err)
	}
	waitDone(t, old, "the holder's Done after its session was invalidated")
	if !errors.Is(old.Err(), locks.ErrNotHeld) {
		t.Fatalf("stale lease Err = %v, want ErrNotHeld", old.Err())
	}
	if took := time.Since(began); took >= locks.DefaultTTL {
		t.Fatalf("Done closed %v after the invalidation, not within the TTL", took)
	}
	_, released := holder(t, c, l)
	c.WaitParked(l.Key(), released, 1) // the waiter, refused by the lock-delay, waits it out
	var w acquired
	if c.Miniconsul() != nil {
		// Manual time has not moved: any grant so far is inside the delay.
		select {
		case w = <-got:
			t.Fatalf("waiter acquired during the lock-delay (token %v)", token(t, w.lease))
		default:
		}
		c.Advance(delay)
		w = <-got
	} else {
		// A real agent's delay runs on the wall clock, which a loaded
		// machine may have carried past it already: the grant must come
		// no sooner than delay after the invalidation was sent. The
		// tolerance covers the agent's wall clock against our monotonic one.
		w = <-got
		const tolerance = 50 * time.Millisecond
		if after := w.at.Sub(began); after < delay-tolerance {
			t.Fatalf("waiter acquired %v after the invalidation, inside the %v lock-delay", after, delay)
		}
	}
	lease := w.lease
	if lease == nil {
		t.FailNow()
	}
	newTok := token(t, lease)
	if newTok <= oldTok {
		t.Fatalf("new token %v not above stale token %v", newTok, oldTok)
	}
	if _, err := fence.Read(newTok); err != nil {
		t.Fatal(err)
	}
	if err := fence.Write(oldTok, "stale"); !errors.Is(err, locks.ErrStaleToken) {
		t.Fatalf("stale write: err = %v, want ErrStaleToken", err)
	}
	if err := old.Unlock(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("stale Unlock: %v, want ErrNotHeld", err)
	}
	if err := lease.Renew(context.Background()); err != nil {
		t.Fatalf("new holder lost the lock to a stale unlock: %v", err)
	}
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	// hashicorp/consul#4902: the Locker that lost the lock acquires again.
	again := mustLock(t, l)
	if again == nil {
		t.FailNow()
	}
	if tok := token(t, again); tok <= newTok {
		t.Fatalf("re-acquired token %v not above %v", tok, newTok)
	}
	if err := again.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestTokenMonotoneAcrossKeyDeletion: LockIndex restarts when the key is
// deleted (and a plain PUT sets it to 0), so it cannot be the token; the
// ModifyIndex-based token keeps growing.
func TestTokenMonotoneAcrossKeyDeletion(t *testing.T) {
	c := server(t)
	l := newLocker(t, c, nil, "res", Session{})
	kv := c.Client().KV()
	ctx := context.Background()
	var toks []locks.Token
	var lockIdx []uint64
	for i := 0; i < 3; i++ {
		lease := mustLock(t, l)
		if lease == nil {
			t.FailNow()
		}
		p, _, err := kv.Get(l.Key(), nil)
		if err != nil {
			t.Fatal(err)
		}
		toks, lockIdx = append(toks, token(t, lease)), append(lockIdx, p.LockIndex)
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 0:
			if _, err := kv.Delete(l.Key(), nil); err != nil {
				t.Fatal(err)
			}
		case 1:
			if _, err := kv.Put(&api.KVPair{Key: l.Key(), Value: []byte("x")}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if lockIdx[0] != 1 || lockIdx[1] != 1 || lockIdx[2] != 1 {
		t.Fatalf("LockIndex per acquisition = %v, want [1 1 1]: restarted by the delete and the plain PUT", lockIdx)
	}
	if !(toks[0] < toks[1] && toks[1] < toks[2]) {
		t.Fatalf("tokens %v not strictly increasing", toks)
	}
}

// shortTTL: a TTL short enough to watch sessions expire on a real agent,
// with servers started to accept it.
const shortTTL = time.Second

func shortTTLServer(t *testing.T) *consulfake.Server {
	return server(t, consulfake.SessionTTLMin(shortTTL))
}

// shortTTLOptions are lock options for shortTTL (a request timeout above
// the default TTL/10, for an agent's disk writes on a busy machine).
func shortTTLOptions(more ...locks.Option) []locks.Option {
	return append([]locks.Option{locks.WithTTL(shortTTL), locks.WithRequestTimeout(shortTTL / 2)}, more...)
}

// TestWatchdogKeepsLease: the watchdog renews the session across three TTLs
// (longer than the server's TTL × 2 invalidation), and the lease stays held
// with its token.
func TestWatchdogKeepsLease(t *testing.T) {
	c := shortTTLServer(t)
	l := newLocker(t, c, nil, "res", Session{TTLMin: shortTTL}, shortTTLOptions()...)
	lease := mustLock(t, l)
	if lease == nil {
		t.FailNow()
	}
	for i := 0; i < 9; i++ {
		before := lease.Deadline()
		c.Advance(shortTTL / 3)
		waitUntil(t, "renewal", func() bool { return lease.Deadline().After(before) })
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("lease lost while the watchdog ran: %v", err)
	}
	if s, _ := holder(t, c, l); s == "" {
		t.Fatal("key released although renewed")
	}
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestUnreachableServerEndsLease: renewals fail against a stopped server;
// Done closes by the lease's local deadline, within the TTL, with
// ErrLeaseExpired (hashicorp/consul#18271: api.Lock could report the lock
// as held long after). miniconsul only: it stops the server.
func TestUnreachableServerEndsLease(t *testing.T) {
	c := server(t, consulfake.ForceMiniconsul())
	l := newLocker(t, c, nil, "res", Session{})
	lease := mustLock(t, l)
	if lease == nil {
		t.FailNow()
	}
	if err := c.Miniconsul().Close(); err != nil {
		t.Fatal(err)
	}
	ttl := locks.DefaultTTL
	c.Advance(ttl - locks.Drift(ttl))
	waitDone(t, lease, "Done at the local deadline")
	if !errors.Is(lease.Err(), locks.ErrLeaseExpired) {
		t.Fatalf("Err = %v, want ErrLeaseExpired", lease.Err())
	}
	_ = lease.Unlock(context.Background()) // fails: the server is gone
}

// TestSessionExpiryReleases: a holder that stops renewing (no watchdog)
// loses Done at its local deadline, before the server invalidates its
// session (at TTL × 2); the server then releases the key, and the waiter
// acquires after the lock-delay.
func TestSessionExpiryReleases(t *testing.T) {
	c := shortTTLServer(t)
	const delay = 300 * time.Millisecond
	s := Session{LockDelay: delay, TTLMin: shortTTL}
	crashed := newLocker(t, c, nil, "job", s, shortTTLOptions(locks.WithWatchdog(false))...)
	waiter := newLocker(t, c, c.NewClient(), "job", s, shortTTLOptions()...)
	old := mustLock(t, crashed)
	if old == nil {
		t.FailNow()
	}
	got := make(chan locks.Lease, 1)
	go func() { got <- mustLock(t, waiter) }()
	_, idx := holder(t, c, crashed)
	c.WaitParked(crashed.Key(), idx, 2)
	c.Advance(shortTTL - locks.Drift(shortTTL))
	waitDone(t, old, "the crashed holder's local deadline")
	if !errors.Is(old.Err(), locks.ErrLeaseExpired) {
		t.Fatalf("Err = %v, want ErrLeaseExpired", old.Err())
	}
	if sess, _ := holder(t, c, crashed); sess == "" {
		t.Fatal("the server released the key before TTL × 2")
	}
	// The waiter renews its own session every TTL/2 while it waits:
	// advance in steps so that it keeps up.
	released := idx
	for i := 0; i < 8 && released == idx; i++ {
		c.Advance(shortTTL / 4)
		_, released = holder(t, c, crashed)
	}
	if released == idx {
		t.Fatal("the server never invalidated the crashed session")
	}
	c.WaitParked(crashed.Key(), released, 1)
	c.Advance(delay)
	lease := <-got
	if lease == nil {
		t.FailNow()
	}
	if token(t, lease) <= token(t, old) {
		t.Fatal("token did not grow")
	}
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestForeignOwnerCannotTouch: the backend operations with another session
// return ErrNotHeld and leave the lock held.
func TestForeignOwnerCannotTouch(t *testing.T) {
	c := server(t)
	l := newLocker(t, c, nil, "res", Session{})
	lease := mustLock(t, l)
	if lease == nil {
		t.FailNow()
	}
	ctx := context.Background()
	a, err := l.newAttempt(ctx) // a live session that is not the holder
	if err != nil {
		t.Fatal(err)
	}
	foreign := &leaseOps{l: l, key: l.Key(), session: a.session}
	if err := foreign.Release(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("foreign release: %v", err)
	}
	if err := foreign.Renew(ctx); !errors.Is(err, locks.ErrNotHeld) { // destroyed by the release
		t.Fatalf("foreign renew: %v", err)
	}
	if _, err := l.TryLock(ctx); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock after foreign release: %v, want ErrLocked", err)
	}
	locktest.UnlockOnce(t, lease)
}

func TestTryLock(t *testing.T) {
	c := server(t)
	l := newLocker(t, c, nil, "res", Session{LockDelay: time.Second})
	ctx := context.Background()
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(ctx); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("second TryLock: %v, want ErrLocked", err)
	}
	tok := token(t, lease)
	sess, _ := holder(t, c, l)
	if err := c.ExpireSession(sess); err != nil {
		t.Fatal(err)
	}
	waitDone(t, lease, "Done after the session expired")
	if _, err := l.TryLock(ctx); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock during the lock-delay: %v, want ErrLocked", err)
	}
	c.Advance(time.Second)
	again, err := l.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the lock-delay: %v", err)
	}
	if token(t, again) <= tok {
		t.Fatal("fencing token did not grow")
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestHandoverIsNotified: the waiter gets the lock on unlock with a clock
// that never moves, so no timer can have woken it.
func TestHandoverIsNotified(t *testing.T) {
	c := server(t)
	a := newLocker(t, c, nil, "res", Session{})
	b := newLocker(t, c, c.NewClient(), "res", Session{})
	first := mustLock(t, a)
	got := make(chan locks.Lease, 1)
	go func() { got <- mustLock(t, b) }()
	_, idx := holder(t, c, a)
	c.WaitParked(a.Key(), idx, 2)
	if err := first.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil {
		t.FailNow()
	}
	if token(t, second) <= token(t, first) {
		t.Fatal("token did not grow")
	}
	if err := second.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestWaitBudget: the budget is counted from the start of Lock, not
// restarted by the wake-ups of a key that changes but stays held.
func TestWaitBudget(t *testing.T) {
	c := server(t)
	l := newLocker(t, c, nil, "res", Session{}, locks.WithWaitBudget(2*time.Second))
	holderLease := mustLock(t, l)
	defer holderLease.Unlock(context.Background())
	done := make(chan error, 1)
	go func() { _, err := l.Lock(context.Background()); done <- err }()
	sess, idx := holder(t, c, l)
	c.WaitParked(l.Key(), idx, 2)
	c.Advance(time.Second)
	// The holder writes a value: the key changes, still held by it.
	ok, _, err := c.Client().KV().Acquire(&api.KVPair{Key: l.Key(), Session: sess, Value: []byte("progress")}, nil)
	if err != nil || !ok {
		t.Fatalf("holder's update: %v %v", ok, err)
	}
	_, idx2 := holder(t, c, l)
	c.WaitParked(l.Key(), idx2, 2)
	select {
	case err := <-done:
		t.Fatalf("Lock returned early: %v", err)
	default:
	}
	c.Advance(time.Second)
	if err := <-done; !errors.Is(err, locks.ErrWaitBudget) {
		t.Fatalf("Lock: %v, want ErrWaitBudget", err)
	}
}

func TestCancelledContext(t *testing.T) {
	c := server(t)
	l := newLocker(t, c, nil, "res", Session{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Lock(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock: %v", err)
	}
	if _, err := l.TryLock(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("TryLock: %v", err)
	}
	lease := mustLock(t, l)
	if lease == nil {
		t.FailNow()
	}
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := l.Lock(ctx); done <- err }()
	_, idx := holder(t, c, l)
	c.WaitParked(l.Key(), idx, 2)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting Lock: %v", err)
	}
	if m := c.Miniconsul(); m != nil {
		if n := len(m.Sessions()); n != 1 {
			t.Fatalf("%d sessions after the waiter gave up, want the holder's only", n)
		}
	}
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestBadInput(t *testing.T) {
	c := server(t)
	cl := c.Client()
	cases := []struct {
		name string
		err  error
		make func() (*Locker, error)
	}{
		{"nil client", locks.ErrNilClient, func() (*Locker, error) { return New(nil, "x") }},
		{"empty name", locks.ErrInvalidName, func() (*Locker, error) { return New(cl, "") }},
		{"control char", locks.ErrInvalidName, func() (*Locker, error) { return New(cl, "a\nb") }},
		{"double slash", locks.ErrInvalidName, func() (*Locker, error) { return New(cl, "a//b") }},
		{"dot segment", locks.ErrInvalidName, func() (*Locker, error) { return New(cl, "a/../b") }},
		{"leading slash", locks.ErrInvalidName, func() (*Locker, error) { return New(cl, "/a", locks.WithPrefix("")) }},
		{"queue segment", locks.ErrInvalidName, func() (*Locker, error) { return New(cl, "a/.queue/b") }},
		{"TTL below Consul's minimum", locks.ErrInvalidTTL, func() (*Locker, error) {
			return New(cl, "x", locks.WithTTL(5*time.Second))
		}},
		{"TTL above 24h", locks.ErrInvalidTTL, func() (*Locker, error) { return New(cl, "x", locks.WithTTL(25*time.Hour)) }},
		{"zero TTL", locks.ErrInvalidTTL, func() (*Locker, error) { return New(cl, "x", locks.WithTTL(0)) }},
		{"TTL below a lowered minimum", locks.ErrInvalidTTL, func() (*Locker, error) {
			return NewWithSession(cl, "x", Session{TTLMin: 2 * time.Second}, locks.WithTTL(time.Second))
		}},
		{"negative TTL minimum", locks.ErrInvalidOption, func() (*Locker, error) {
			return NewWithSession(cl, "x", Session{TTLMin: -time.Second})
		}},
		{"lock-delay below 1ms", locks.ErrInvalidOption, func() (*Locker, error) {
			return NewWithSession(cl, "x", Session{LockDelay: 500 * time.Nanosecond})
		}},
		{"lock-delay above 60s", locks.ErrInvalidOption, func() (*Locker, error) {
			return NewWithSession(cl, "x", Session{LockDelay: 61 * time.Second})
		}},
		{"nil clock", locks.ErrInvalidOption, func() (*Locker, error) { return New(cl, "x", locks.WithClock(nil)) }},
		{"negative budget", locks.ErrInvalidOption, func() (*Locker, error) { return New(cl, "x", locks.WithWaitBudget(-1)) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.make()
			if !errors.Is(err, tc.err) || l != nil {
				t.Fatalf("got (%v, %v), want error %v", l, err, tc.err)
			}
		})
	}
	// Accepted client-side, refused by a server with the default minimum:
	// Consul's own message comes through.
	l, err := NewWithSession(cl, "x", Session{TTLMin: time.Second}, append(c.LockOptions(), locks.WithTTL(time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.TryLock(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Invalid Session TTL '1000000000', must be between [10s=24h0m0s]") {
		t.Fatalf("TryLock with a TTL the server refuses: %v", err)
	}
	if def, _ := New(cl, "x"); def.LockDelay() != locks.DefaultTTL {
		t.Fatalf("default lock-delay %v, want the TTL", def.LockDelay())
	}
	if long, _ := New(cl, "x", locks.WithTTL(time.Hour)); long.LockDelay() != MaxLockDelay {
		t.Fatalf("lock-delay for a 1h TTL %v, want %v", long.LockDelay(), MaxLockDelay)
	}
}

func TestNextIndex(t *testing.T) {
	for _, tc := range []struct{ prev, got, want uint64 }{
		{0, 7, 7}, // first, immediate read
		{7, 9, 9}, // woken by a change
		{9, 9, 9}, // the wait ended without a change
		{9, 4, 0}, // backwards: restart with an immediate read
		{0, 0, 1}, // never 0 after a read
	} {
		if got := nextIndex(tc.prev, tc.got); got != tc.want {
			t.Errorf("nextIndex(%d, %d) = %d, want %d", tc.prev, tc.got, got, tc.want)
		}
	}
}

// TestLocalTurns: Lock calls sharing a Locker queue locally; only one
// contends on the server (one session, one blocking query), and all get the
// lock in turn once the holder releases it.
func TestLocalTurns(t *testing.T) {
	c := server(t, consulfake.ForceMiniconsul())
	l := newLocker(t, c, nil, "res", Session{})
	first := mustLock(t, l)
	if first == nil {
		t.FailNow()
	}
	const n = 3
	got := make(chan locks.Lease, n)
	for range n {
		go func() { got <- mustLock(t, l) }()
	}
	_, idx := holder(t, c, l)
	c.WaitParked(l.Key(), idx, 2)     // the holder's monitor and one waiter
	time.Sleep(50 * time.Millisecond) // room for a wrong second contender to show up
	if s := c.Miniconsul().Sessions(); len(s) != 2 {
		t.Fatalf("%d sessions while %d goroutines wait on one Locker, want 2 (the holder's and one waiter's)", len(s), n)
	}
	if b := c.Miniconsul().Blocked(); b != 2 {
		t.Fatalf("%d blocking queries, want 2", b)
	}
	last := token(t, first)
	if err := first.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range n {
		lease := <-got
		if lease == nil {
			t.FailNow()
		}
		if tok := token(t, lease); tok <= last {
			t.Fatalf("token %v not above %v", tok, last)
		}
		last = token(t, lease)
		if err := lease.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// gatedAcquire holds one acquire request of a client (once armed): it is
// sent only after before is closed, reports on sent once answered, and
// its answer is returned only after after is closed.
type gatedAcquire struct {
	next          http.RoundTripper
	armed         atomic.Bool
	arrived       chan struct{} // closed when the gated acquire reaches the gate
	before, after chan struct{}
	sent          chan struct{}
}

func (g *gatedAcquire) RoundTrip(r *http.Request) (*http.Response, error) {
	if key, ok := acquiredKey(r); !ok || strings.Contains(key, "/"+queueSegment+"/") ||
		!g.armed.CompareAndSwap(true, false) {
		return g.next.RoundTrip(r)
	}
	close(g.arrived)
	<-g.before
	resp, err := g.next.RoundTrip(r)
	close(g.sent)
	<-g.after
	return resp, err
}

// TestRefusedByFasterWaiterIsNoLockDelay: a Locker waits at the head of
// the queue; at the release another process (a TryLock, which does not
// queue) takes the key first, the waiter's acquire is refused, and the
// TryLock holder releases before the waiter looks again. The waiter finds
// the key free but moved: someone took it, so the refusal was no
// lock-delay, and it must try again at once, not wait out a lock-delay (the
// clock never moves here: such a wait would never end).
func TestRefusedByFasterWaiterIsNoLockDelay(t *testing.T) {
	c := server(t, consulfake.ForceMiniconsul())
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	gate := &gatedAcquire{next: tr, arrived: make(chan struct{}), before: make(chan struct{}), after: make(chan struct{}), sent: make(chan struct{})}
	gated, err := api.NewClient(&api.Config{Address: c.Addr(), HttpClient: &http.Client{Transport: gate}})
	if err != nil {
		t.Fatal(err)
	}
	h := newLocker(t, c, nil, "res", Session{LockDelay: time.Second})
	winner := newLocker(t, c, c.NewClient(), "res", Session{LockDelay: time.Second})
	loser := newLocker(t, c, gated, "res", Session{LockDelay: time.Second})
	first := mustLock(t, h)
	if first == nil {
		t.FailNow()
	}
	lost := make(chan locks.Lease, 1)
	go func() { lost <- mustLock(t, loser) }()
	_, idx := holder(t, c, h)
	c.WaitParked(h.Key(), idx, 2) // the holder's monitor and the waiter
	gate.armed.Store(true)
	if err := first.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The waiter's acquire is held at the gate: the key is free for
	// TryLock. Only once it is there: a waiter slow to wake (a loaded
	// machine under -race) would otherwise read the key after the
	// TryLock took it and wait for that holder without any acquire,
	// which is right, but not the case this test is about.
	select {
	case <-gate.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter sent no acquire within 10 s of the release")
	}
	w, err := winner.TryLock(context.Background())
	if err != nil {
		t.Fatalf("TryLock after the release: %v", err)
	}
	close(gate.before) // the loser's acquire goes now, and is refused
	<-gate.sent
	if err := w.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(gate.after) // the loser learns of its refusal only now
	select {
	case l := <-lost:
		if l == nil {
			t.FailNow()
		}
		if token(t, l) <= token(t, w) {
			t.Fatal("token did not grow")
		}
		if err := l.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loser took a refusal by a faster waiter for a lock-delay and is waiting it out")
	}
}

// TestKeyIsWhereTheLockLives: a held lock is Key on the server, held by the
// lease's session, and the fake's ExpireLock, which finds the key through
// the same layout, ends the lease. A change of the key on either side
// fails here.
func TestKeyIsWhereTheLockLives(t *testing.T) {
	c := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := newLocker(t, c, nil, "orders/42", Session{})
	key := Key(c.Prefix(), "orders/42")
	if l.Key() != key {
		t.Fatalf("Locker.Key() = %q, Key = %q", l.Key(), key)
	}
	lease := mustLock(t, l)
	kv, _, err := c.Client().KV().Get(key, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if kv == nil || kv.Session == "" {
		t.Fatalf("no session holds %s while the lock is held (%+v)", key, kv)
	}
	locktest.ExpiredFromOutside(t, lease, func(ctx context.Context) error { return c.ExpireLock(ctx, "orders/42") }, fakes.ErrNoHolder)
}

// TestAcquireRacingAnInvalidation: Consul checks the lock-delay before an
// acquire goes to Raft, so an acquire checked just before the holder's
// session is invalidated and applied just after takes the key inside the
// lock-delay (seen on a real agent in CI, and in 15 of 20 rounds of a
// loop of acquires). miniconsul's hook puts the invalidation exactly
// there. Neither a TryLock nor a Lock may be granted before the delay
// ends: the holder that lost the key may not know yet.
func TestAcquireRacingAnInvalidation(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		t.Run(map[bool]string{false: "TryLock", true: "Lock"}[blocking], func(t *testing.T) {
			c := server(t, consulfake.ForceMiniconsul())
			const delay = 5 * time.Second
			l := newLocker(t, c, nil, "job", Session{LockDelay: delay})
			other := newLocker(t, c, c.NewClient(), "job", Session{LockDelay: delay})
			old := mustLock(t, l)
			oldTok := token(t, old)
			sess, _ := holder(t, c, l)
			var raced atomic.Bool
			c.Miniconsul().AfterLockDelayCheck(func(key string) {
				if key == l.Key() && raced.CompareAndSwap(false, true) {
					if err := c.ExpireSession(sess); err != nil {
						t.Error(err)
					}
				}
			})
			t.Cleanup(func() { c.Miniconsul().AfterLockDelayCheck(nil) })

			var lease locks.Lease
			if !blocking {
				_, err := other.TryLock(context.Background())
				if !raced.Load() {
					t.Fatal("the hook never ran: no acquire of the lock's key")
				}
				if !errors.Is(err, locks.ErrLocked) {
					t.Fatalf("TryLock racing the holder's invalidation: %v, want ErrLocked (inside the %v lock-delay)", err, delay)
				}
				waitDone(t, old, "the old holder's Done")
				c.Advance(delay)
				lease = locktest.MustTryLock(t, other)
			} else {
				got := locktest.LockAsync(context.Background(), other)
				waitDone(t, old, "the old holder's Done")
				_, idx := holder(t, c, l)
				c.WaitParked(l.Key(), idx, 1) // the waiter, refused, waits the delay out
				select {
				case r := <-got:
					t.Fatalf("Lock racing the holder's invalidation returned inside the %v lock-delay: %v", delay, r.Err)
				default:
				}
				c.Advance(delay)
				r := locktest.Receive(t, got)
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				lease = r.Lease
			}
			if tok := token(t, lease); tok <= oldTok {
				t.Fatalf("token %v not above the old holder's %v", tok, oldTok)
			}
			if err := lease.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestTryLocksRacingAnInvalidationOnAgent is the race of
// TestAcquireRacingAnInvalidation on a real agent, where only timing puts
// an acquire between the leader's lock-delay check and its apply: four
// clients TryLock in a loop while the holder's session is destroyed, in
// each of several rounds. No TryLock may be granted inside the lock-delay.
func TestTryLocksRacingAnInvalidationOnAgent(t *testing.T) {
	c := server(t)
	if c.Miniconsul() != nil {
		t.Skip("needs a real agent: miniconsul checks the lock-delay and applies at once (see TestAcquireRacingAnInvalidation)")
	}
	const (
		delay   = 2 * time.Second
		rounds  = 8
		racers  = 4
		watched = 300 * time.Millisecond
	)
	for round := range rounds {
		name := fmt.Sprintf("race%d", round)
		h := newLocker(t, c, nil, name, Session{LockDelay: delay})
		old := mustLock(t, h)
		sess, _ := holder(t, c, h)
		var (
			began atomic.Int64 // UnixNano of the destroy's send; 0 before
			first atomic.Int64 // UnixNano of the first grant after it
			wg    sync.WaitGroup
		)
		stop := make(chan struct{})
		for range racers {
			l := newLocker(t, c, c.NewClient(), name, Session{LockDelay: delay})
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					lease, err := l.TryLock(context.Background())
					if err != nil {
						continue // ErrLocked, mostly
					}
					first.CompareAndSwap(0, time.Now().UnixNano())
					_ = lease.Unlock(context.Background())
					return
				}
			})
		}
		time.Sleep(50 * time.Millisecond) // the racers at full speed
		began.Store(time.Now().UnixNano())
		if err := c.ExpireSession(sess); err != nil {
			t.Fatal(err)
		}
		time.Sleep(watched)
		close(stop)
		wg.Wait()
		waitDone(t, old, "the old holder's Done")
		if at := first.Load(); at != 0 {
			t.Fatalf("round %d: a TryLock was granted %v after the holder's session was destroyed, inside the %v lock-delay",
				round, time.Duration(at-began.Load()), delay)
		}
	}
}
