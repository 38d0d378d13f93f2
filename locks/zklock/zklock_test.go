package zklock

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

func TestNewValidation(t *testing.T) {
	conn := new(zk.Conn) // never used: New only checks its arguments
	for _, tc := range []struct {
		what string
		conn *zk.Conn
		name string
		opts []locks.Option
		want error
	}{
		{"nil conn", nil, "a", nil, locks.ErrNilClient},
		{"empty name", conn, "", nil, locks.ErrInvalidName},
		{"control character", conn, "a\nb", nil, locks.ErrInvalidName},
		{"TTL too short", conn, "a", []locks.Option{locks.WithTTL(time.Millisecond)}, locks.ErrInvalidTTL},
		{"request timeout not below TTL", conn, "a", []locks.Option{locks.WithRequestTimeout(time.Minute)}, locks.ErrInvalidOption},
		{"relative prefix", conn, "a", []locks.Option{locks.WithPrefix("locks")}, locks.ErrInvalidOption},
		{"empty segment", conn, "a", []locks.Option{locks.WithPrefix("/a//b")}, locks.ErrInvalidOption},
		{"dot segment", conn, "a", []locks.Option{locks.WithPrefix("/a/./b")}, locks.ErrInvalidOption},
		{"dot-dot segment", conn, "a", []locks.Option{locks.WithPrefix("/a/..")}, locks.ErrInvalidOption},
		{"refused character", conn, "a", []locks.Option{locks.WithPrefix("/a\ufff5")}, locks.ErrInvalidOption},
	} {
		t.Run(tc.what, func(t *testing.T) {
			l, err := New(tc.conn, tc.name, tc.opts...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("New = %v, %v; want an error wrapping %v", l, err, tc.want)
			}
		})
	}
}

func TestNodePath(t *testing.T) {
	conn := new(zk.Conn)
	for _, tc := range []struct {
		prefix, name, want string
	}{
		{"", "orders/42", "/lockproof/orders%2F42"},
		{"", "100%", "/lockproof/100%25"},
		{"", ".", "/lockproof/%2E"},
		{"", "..", "/lockproof/%2E%2E"},
		{"", "a.b", "/lockproof/a.b"},
		{"", "é", "/lockproof/é"},
		{"", "🔒", "/lockproof/%F0%9F%94%92"},
		{"", "\ue000", "/lockproof/%EE%80%80"},
		{"/", "x", "/x"},
		{"/apps/locks/", "x", "/apps/locks/x"},
	} {
		var opts []locks.Option
		if tc.prefix != "" {
			opts = append(opts, locks.WithPrefix(tc.prefix))
		}
		l, err := New(conn, tc.name, opts...)
		if err != nil {
			t.Fatalf("New(%q, prefix %q): %v", tc.name, tc.prefix, err)
		}
		if got := l.NodePath(); got != tc.want {
			t.Errorf("NodePath of %q under %q = %q, want %q", tc.name, tc.prefix, got, tc.want)
		}
	}
}

// contenderName is the form of a contender's node.
var contenderName = regexp.MustCompile(`^_c_[0-9a-f]{32}-lock-[0-9]{10}$`)

// TestLockUnlock: one acquisition: one protected child, whose czxid is the
// token; Renew works; Unlock deletes the child, and the lease cannot be
// used again.
func TestLockUnlock(t *testing.T) {
	s := server(t)
	conn := s.connect(t)
	l := s.newLocker(t, conn, "basic")
	lease := locktest.MustLock(t, l)
	tok := locktest.Token(t, lease)
	kids := children(t, conn, l)
	if len(kids) != 1 || !contenderName.MatchString(kids[0]) {
		t.Fatalf("children %v, want one protected contender", kids)
	}
	_, st, err := conn.Get(l.NodePath() + "/" + kids[0])
	if err != nil {
		t.Fatal(err)
	}
	if locks.Token(st.Czxid) != tok || st.EphemeralOwner != conn.SessionID() {
		t.Fatalf("token %v, child czxid %d owner %x; want the czxid, owned by session %x", tok, st.Czxid, st.EphemeralOwner, conn.SessionID())
	}
	if !lease.Deadline().After(time.Now()) {
		t.Fatalf("deadline %v already passed", lease.Deadline())
	}
	if err := lease.Renew(context.Background()); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	locktest.UnlockOnce(t, lease)
	if kids := children(t, conn, l); len(kids) != 0 {
		t.Fatalf("children %v left after Unlock", kids)
	}
	if err := lease.Err(); !errors.Is(err, locks.ErrReleased) {
		t.Fatalf("Err after Unlock = %v, want ErrReleased", err)
	}
}

// TestExclusionThroughFence: 12 goroutines in 4 "processes" (each its own
// connection and Locker) × 15 acquisitions, each a read-modify-write
// through a Fence. No update may be lost and no access refused.
func TestExclusionThroughFence(t *testing.T) {
	s := server(t)
	const procs, perProc, rounds = 4, 3, 15
	var fence locks.Fence[int]
	var inside atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, procs*perProc)
	var conn *zk.Conn
	var l *Locker
	for range procs {
		conn = s.connect(t)
		l = s.newLocker(t, conn, "counter")
		mine := l // l changes with the next connection; the goroutines keep this one
		for range perProc {
			wg.Go(func() { errs <- locktest.FencedIncrements(mine, &fence, &inside, rounds, time.Minute) })
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
	if st := fence.Stats(); st.Rejected != 0 {
		t.Fatalf("fence rejected %d stale accesses", st.Rejected)
	}
	if kids := children(t, conn, l); len(kids) != 0 {
		t.Fatalf("children %v left after every unlock", kids)
	}
}

// TestTokensIncrease: acquisitions by two connections, by Lock and by
// TryLock, one after the other: every token is above the one before.
func TestTokensIncrease(t *testing.T) {
	s := server(t)
	ls := []*Locker{s.newLocker(t, s.connect(t), "tokens"), s.newLocker(t, s.connect(t), "tokens")}
	var last locks.Token
	for i := range 10 {
		l := ls[i%2]
		var lease locks.Lease
		if i%3 == 0 {
			var err error
			if lease, err = l.TryLock(context.Background()); err != nil {
				t.Fatalf("TryLock: %v", err)
			}
		} else {
			lease = locktest.MustLock(t, l)
		}
		tok := locktest.Token(t, lease)
		if tok <= last {
			t.Fatalf("acquisition %d: token %v after %v", i, tok, last)
		}
		last = tok
		if err := lease.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// gateFunc adapts a function to locks.Gate.
type gateFunc func(ctx context.Context, what string) func()

func (f gateFunc) Request(ctx context.Context, what string) func() { return f(ctx, what) }

// TestTryLockRefusedLeavesNothing: TryLock on a held lock is refused
// without creating anything; one that creates its child only to find
// another contender come first deletes it again.
func TestTryLockRefusedLeavesNothing(t *testing.T) {
	s := server(t)
	conn, other := s.connect(t), s.connect(t)
	l, l2 := s.newLocker(t, conn, "try"), s.newLocker(t, other, "try")
	holder := locktest.MustLock(t, l)
	if _, err := l2.TryLock(context.Background()); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock on a held lock: %v, want ErrLocked", err)
	}
	if kids := children(t, conn, l); len(kids) != 1 {
		t.Fatalf("children %v, want the holder's alone", kids)
	}
	if err := holder.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}

	// A contender arrives between TryLock's look and its create: the gate
	// creates it just before TryLock's create goes out.
	var once sync.Once
	var rival string
	gate := gateFunc(func(_ context.Context, what string) func() {
		if what == "zk create" {
			once.Do(func() {
				c := newContender(l)
				var err error
				if rival, err = conn.Create(c.prefix, nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll)); err != nil {
					t.Errorf("create the rival: %v", err)
				}
			})
		}
		return func() {}
	})
	if _, err := l2.TryLock(locks.WithGate(context.Background(), gate)); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock behind a rival: %v, want ErrLocked", err)
	}
	if kids := children(t, conn, l); len(kids) != 1 || l.NodePath()+"/"+kids[0] != rival {
		t.Fatalf("children %v, want the rival's alone (%s)", kids, rival)
	}
}

// TestHandOffInOrderWithoutHerd: five waiters queue one after the other
// behind a holder; each release hands the lock to the next in line, and
// wakes it alone. Watch events are counted on every connection: per
// release, the releaser's own watch on its node (its lease's monitor) and
// the next waiter's watch on its predecessor, never the waiters further
// back.
func TestHandOffInOrderWithoutHerd(t *testing.T) {
	s := server(t)
	const waiters = 5
	var deletions atomic.Int64
	count := func(ev zk.Event) {
		if ev.Type == zk.EventNodeDeleted && strings.HasPrefix(ev.Path, s.prefix) {
			deletions.Add(1)
		}
	}
	conn := s.connectWith(t, connOpts{events: count})
	l := s.newLocker(t, conn, "fifo")
	lease := locktest.MustLock(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	results := make([]<-chan locktest.Result, waiters)
	for i := range waiters {
		results[i] = locktest.LockAsync(ctx, s.newLocker(t, s.connectWith(t, connOpts{events: count}), "fifo"))
		waitChildren(t, conn, l, i+2)
	}
	for i := range waiters {
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		r := locktest.Receive(t, results[i])
		if r.Err != nil {
			t.Fatalf("waiter %d: %v", i, r.Err)
		}
		for j := i + 1; j < waiters; j++ {
			select {
			case r := <-results[j]:
				t.Fatalf("waiter %d returned before waiter %d: %v", j, i, r.Err)
			default:
			}
		}
		lease = r.Lease
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, conn, l, 0)
	// Watch events reach each connection's callback on its own goroutine,
	// after the delete that fired them has returned: wait a little for the
	// ones usually owed, one per hand-off. Fewer is no bug: a waiter that
	// finds its predecessor gone before its watch went out sets none, and a
	// lease unlocked before its monitor watched its node has no watch to
	// fire. What this test is for is the upper bound; at least one event
	// shows that the count works at all.
	for wait := time.Now().Add(2 * time.Second); deletions.Load() < waiters && time.Now().Before(wait); {
		time.Sleep(5 * time.Millisecond)
	}
	got, most := deletions.Load(), int64(2*waiters+1)
	t.Logf("%d node-deleted watch events for %d hand-offs", got, waiters)
	if got > most {
		t.Fatalf("%d node-deleted watch events for %d hand-offs, want at most %d: a herd", got, waiters, most)
	}
	if got == 0 {
		t.Fatal("no node-deleted watch event counted at all")
	}
}

// TestNodeDeletedEndsLease: someone else deletes the holder's child. Done
// closes at once (ErrNotHeld), Unlock says so, and the lock is free.
func TestNodeDeletedEndsLease(t *testing.T) {
	s := server(t)
	conn, other := s.connect(t), s.connect(t)
	l := s.newLocker(t, conn, "deleted")
	lease := locktest.MustLock(t, l)
	tok := locktest.Token(t, lease)
	kids := children(t, other, l)
	if err := other.Delete(l.NodePath()+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	locktest.Closed(t, "Done after the child was deleted", lease.Done())
	if err := lease.Err(); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Err = %v, want ErrNotHeld", err)
	}
	if err := lease.Renew(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Renew of a lost lease = %v, want ErrNotHeld", err)
	}
	if err := lease.Unlock(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Unlock of a lost lease = %v, want ErrNotHeld", err)
	}
	if err := lease.Unlock(context.Background()); !errors.Is(err, locks.ErrReleased) {
		t.Fatalf("second Unlock = %v, want ErrReleased", err)
	}
	next, err := s.newLocker(t, other, "deleted").TryLock(context.Background())
	if err != nil {
		t.Fatalf("TryLock after the loss: %v", err)
	}
	if got := locktest.Token(t, next); got <= tok {
		t.Fatalf("token %v after %v", got, tok)
	}
	locktest.UnlockOnce(t, next)
}

// TestSessionExpiryEndsLease: the holder's session is closed on the server
// (as an expiry would: its ephemeral nodes go). Done closes well within
// the TTL, the waiter gets the lock with a higher token, the old holder's
// fenced write is refused, and the Locker acquires again on the
// connection's new session.
func TestSessionExpiryEndsLease(t *testing.T) {
	t.Parallel()
	skipReconnectsUnderRace(t)
	s := server(t)
	d := &faultDialer{}
	conn := s.connectWith(t, connOpts{dialer: d})
	l := s.newLocker(t, conn, "expiry")
	waiter := s.newLocker(t, s.connect(t), "expiry")
	lease := locktest.MustLock(t, l)
	tok := locktest.Token(t, lease)
	var fence locks.Fence[string]
	if err := fence.Write(tok, "old"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := locktest.LockAsync(ctx, waiter)
	waitChildren(t, conn, l, 2)

	id, passwd := d.credentials()
	if id != conn.SessionID() {
		t.Fatalf("recorded session %x, connection has %x", id, conn.SessionID())
	}
	killed := time.Now()
	killSession(t, s.addr, id, passwd)
	locktest.Closed(t, "Done after the session was closed", lease.Done())
	if waited := time.Since(killed); waited > sessionTimeout/2 {
		t.Errorf("Done closed %v after the session ended; the watch should say at once", waited)
	}
	if err := lease.Err(); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Err = %v, want ErrNotHeld", err)
	}
	r := locktest.Receive(t, res)
	if r.Err != nil {
		t.Fatalf("waiter: %v", r.Err)
	}
	newTok := locktest.Token(t, r.Lease)
	if newTok <= tok {
		t.Fatalf("token %v after %v", newTok, tok)
	}
	if err := fence.Write(newTok, "new"); err != nil {
		t.Fatal(err)
	}
	if err := fence.Write(tok, "stale"); !errors.Is(err, locks.ErrStaleToken) {
		t.Fatalf("stale holder's write: %v, want ErrStaleToken", err)
	}
	if err := lease.Unlock(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Unlock of the lost lease = %v, want ErrNotHeld", err)
	}
	locktest.UnlockOnce(t, r.Lease)

	again := locktest.MustLock(t, l)
	if conn.SessionID() == id {
		t.Fatalf("the connection still has session %x", id)
	}
	if got := locktest.Token(t, again); got <= newTok {
		t.Fatalf("token %v after %v", got, newTok)
	}
	locktest.UnlockOnce(t, again)
}

// TestNetworkCutEndsLeaseBeforeExpiry: the holder's network goes silent.
// Its lease ends (ErrLeaseExpired) before the server expires its session
// and the waiter gets the lock: the lease is counted from the last proof
// that the session was alive, not from when the client noticed.
func TestNetworkCutEndsLeaseBeforeExpiry(t *testing.T) {
	t.Parallel()
	skipReconnectsUnderRace(t)
	s := server(t)
	const short = 1500 * time.Millisecond
	d := &faultDialer{}
	conn := s.connectWith(t, connOpts{dialer: d, timeout: short})
	l := s.newLocker(t, conn, "cut", locks.WithTTL(short))
	other := s.connect(t)
	waiter := s.newLocker(t, other, "cut")
	lease := locktest.MustLock(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := locktest.LockAsync(ctx, waiter)
	waitChildren(t, other, waiter, 2)

	d.setCut(true)
	cut := time.Now()
	locktest.Closed(t, "Done after the network was cut", lease.Done())
	ended := time.Now()
	if err := lease.Err(); !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("Err = %v, want ErrLeaseExpired", err)
	}
	r := locktest.Receive(t, res)
	got := time.Now()
	if r.Err != nil {
		t.Fatalf("waiter: %v", r.Err)
	}
	t.Logf("cut at 0, lease ended at %v, waiter got the lock at %v", ended.Sub(cut), got.Sub(cut))
	if !ended.Before(got) {
		t.Fatalf("the waiter got the lock (%v after the cut) before the holder's lease ended (%v)", got.Sub(cut), ended.Sub(cut))
	}
	if ended.Sub(cut) > short {
		t.Fatalf("the lease ended %v after the cut, more than the session timeout %v", ended.Sub(cut), short)
	}
	d.setCut(false)
	if err := lease.Unlock(ctx); err == nil {
		t.Fatal("Unlock of an expired lease succeeded")
	}
	locktest.UnlockOnce(t, r.Lease)
}

// TestLostCreateReplyRecovered: the connection drops just as the reply to
// the contender's create comes back (the node was made, the client never
// heard). Lock finds its node by its GUID after reconnecting and adopts
// it: one child, not two.
func TestLostCreateReplyRecovered(t *testing.T) {
	t.Parallel()
	skipReconnectsUnderRace(t)
	s := server(t)
	d := &faultDialer{}
	conn := s.connectWith(t, connOpts{dialer: d})
	l := s.newLocker(t, conn, "lostreply")
	if err := l.ensureParents(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.armDrop()
	lease := locktest.MustLock(t, l)
	if d.drops() != 1 {
		t.Fatalf("%d connections dropped at a create's reply, want 1", d.drops())
	}
	kids := children(t, conn, l)
	if len(kids) != 1 {
		t.Fatalf("children %v, want one: the recovered node", kids)
	}
	_, st, err := conn.Get(l.NodePath() + "/" + kids[0])
	if err != nil {
		t.Fatal(err)
	}
	if tok := locktest.Token(t, lease); locks.Token(st.Czxid) != tok {
		t.Fatalf("token %v, the child's czxid %d", tok, st.Czxid)
	}
	locktest.UnlockOnce(t, lease)
	if kids := children(t, conn, l); len(kids) != 0 {
		t.Fatalf("children %v left after Unlock", kids)
	}
}

// TestRecoveryAdoptsProtectedNode: the recovery path on its own: the node
// of a contender's GUID exists (its create went through, unseen); the
// look-up finds it and the contender holds the lock through it.
func TestRecoveryAdoptsProtectedNode(t *testing.T) {
	s := server(t)
	conn := s.connect(t)
	l := s.newLocker(t, conn, "recover")
	ctx := context.Background()
	if err := l.ensureParents(ctx); err != nil {
		t.Fatal(err)
	}
	c := newContender(l)
	path, err := conn.Create(c.prefix, nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	if found, err := l.recoverNode(ctx, c); err != nil || !found || c.path != path {
		t.Fatalf("recoverNode = %v, %v with path %q; want it to find %q", found, err, c.path, path)
	}
	lease, err := l.waitTurn(ctx, c, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, st, err := conn.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	if tok := locktest.Token(t, lease); locks.Token(st.Czxid) != tok {
		t.Fatalf("token %v, the adopted node's czxid %d", tok, st.Czxid)
	}
	if kids := children(t, conn, l); len(kids) != 1 {
		t.Fatalf("children %v, want the adopted node alone", kids)
	}
	locktest.UnlockOnce(t, lease)
}

// TestGivingUpRemovesNode: a waiter whose ctx is cancelled, and one whose
// wait budget runs out, delete their nodes before Lock returns.
func TestGivingUpRemovesNode(t *testing.T) {
	t.Parallel()
	s := server(t)
	conn, other := s.connect(t), s.connect(t)
	l := s.newLocker(t, conn, "giveup")
	holder := locktest.MustLock(t, l)

	ctx, cancel := context.WithCancel(context.Background())
	res := locktest.LockAsync(ctx, s.newLocker(t, other, "giveup"))
	waitChildren(t, conn, l, 2)
	cancel()
	if r := locktest.Receive(t, res); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v, want context.Canceled", r.Err)
	}
	if kids := children(t, conn, l); len(kids) != 1 {
		t.Fatalf("children %v after the cancelled Lock, want the holder's alone", kids)
	}

	budget := s.newLocker(t, other, "giveup", locks.WithWaitBudget(300*time.Millisecond))
	if _, err := budget.Lock(context.Background()); !errors.Is(err, locks.ErrWaitBudget) {
		t.Fatalf("Lock with a wait budget: %v, want ErrWaitBudget", err)
	}
	if kids := children(t, conn, l); len(kids) != 1 {
		t.Fatalf("children %v after the wait budget ran out, want the holder's alone", kids)
	}
	locktest.UnlockOnce(t, holder)
}

// TestGateAndObserver: every request of Lock, Renew and Unlock passes the
// Gate of its context, under a stable name, and the observer hears of the
// acquisition, the renewal and the unlock.
func TestGateAndObserver(t *testing.T) {
	s := server(t)
	var mu sync.Mutex
	var requests []string
	var points []locks.Point
	gate := gateFunc(func(_ context.Context, what string) func() {
		mu.Lock()
		defer mu.Unlock()
		requests = append(requests, what)
		return func() {}
	})
	obs := locks.ObserverFunc(func(_ context.Context, e locks.Event) {
		mu.Lock()
		defer mu.Unlock()
		points = append(points, e.Point)
	})
	l := s.newLocker(t, s.connect(t), "gated", locks.WithObserver(obs), locks.WithWatchdog(false))
	ctx := locks.WithGate(context.Background(), gate)
	lease, err := l.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"zk create", "zk getChildren", "zk exists", "zk delete"} {
		if !slices.Contains(requests, want) {
			t.Errorf("the gate saw %q, not %q", requests, want)
		}
	}
	for _, r := range requests {
		if !strings.HasPrefix(r, "zk ") || strings.ContainsAny(r, "/0123456789") {
			t.Errorf("request name %q is not a stable \"zk <op>\"", r)
		}
	}
	want := []locks.Point{locks.PointAcquired, locks.PointBeforeRenew, locks.PointBeforeUnlock}
	if !slices.Equal(points, want) {
		t.Errorf("observer saw %v, want %v", points, want)
	}
}

// TestExcludesZkLock: go-zookeeper's zk.Lock names its nodes as zklock
// does, so the two exclude each other on one lock node.
func TestExcludesZkLock(t *testing.T) {
	s := server(t)
	conn := s.connect(t)
	l := s.newLocker(t, conn, "interop")
	theirs := zk.NewLock(s.connect(t), l.NodePath(), zk.WorldACL(zk.PermAll))
	if err := theirs.Lock(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryLock(context.Background()); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock while zk.Lock holds: %v, want ErrLocked", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := locktest.LockAsync(ctx, l)
	waitChildren(t, conn, l, 2)
	if err := theirs.Unlock(); err != nil {
		t.Fatal(err)
	}
	r := locktest.Receive(t, res)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	locktest.UnlockOnce(t, r.Lease)
}

// TestUnlockWithEndedContextFreesAtDeadline: an Unlock whose context had
// already ended sends no delete ("left to expire by TTL"); the node is
// ephemeral and would stay for as long as the session does, so the lease's
// monitor deletes it once the lease's deadline has passed, and a waiter
// gets the lock. (Found by the zk-cancelled-waiter-node-left mutant's
// twin, which had the same pattern.)
func TestUnlockWithEndedContextFreesAtDeadline(t *testing.T) {
	t.Parallel()
	s := server(t)
	conn := s.connect(t)
	l := s.newLocker(t, conn, "ended", locks.WithTTL(time.Second), locks.WithWatchdog(false))
	lease, err := l.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := lease.Unlock(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Unlock on an ended context: %v, want context.Canceled", err)
	}
	if kids := children(t, conn, l); len(kids) != 1 {
		t.Fatalf("children %v right after the Unlock, want the node still there (its lease still runs)", kids)
	}
	other := s.newLocker(t, s.connect(t), "ended", locks.WithTTL(time.Second))
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	next, err := other.Lock(ctx)
	if err != nil {
		t.Fatalf("a waiter never got the lock after the unlocked lease's deadline: %v (children %v)", err, children(t, conn, l))
	}
	if err := next.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestGivingUpWithCreateCutOffOnStoppedClock: a Lock whose ctx ends while
// the create of its node is cut off waits for the create's clean-up at
// most the request timeout of wall time, as every request's bound, not of
// the Locker's clock: on a clock nobody moves meanwhile (a manual one in a
// test that waits for the Lock to return), it waited until go-zookeeper
// found the connection dead. So the Lock must return before the connection
// is seen lost. (Found by lockproof check's zklock network cell, where the
// suite's crash of such a Lock never returned.)
func TestGivingUpWithCreateCutOffOnStoppedClock(t *testing.T) {
	t.Parallel()
	skipReconnectsUnderRace(t)
	s := server(t)
	d := &faultDialer{}
	var mu sync.Mutex
	lost := false
	conn := s.connectWith(t, connOpts{dialer: d, events: func(e zk.Event) {
		if e.Type == zk.EventSession && e.State == zk.StateDisconnected {
			mu.Lock()
			lost = true
			mu.Unlock()
		}
	}})
	stopped := fakes.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := s.newLocker(t, conn, "stopped", locks.WithClock(stopped), locks.WithWatchdog(false),
		locks.WithRequestTimeout(100*time.Millisecond))
	locktest.UnlockOnce(t, locktest.MustLock(t, l)) // the lock's node exists from now on

	sent := make(chan struct{})
	var once sync.Once
	gate := gateFunc(func(_ context.Context, what string) func() {
		if what == "zk create" {
			d.setCut(true)
			once.Do(func() { close(sent) })
		}
		return func() {}
	})
	ctx, cancel := context.WithCancel(locks.WithGate(context.Background(), gate))
	defer cancel()
	res := locktest.LockAsync(ctx, l)
	<-sent
	cancel()
	r := locktest.Receive(t, res)
	mu.Lock()
	seenLost := lost
	mu.Unlock()
	if !errors.Is(r.Err, context.Canceled) || seenLost {
		t.Fatalf("Lock cancelled with its create cut off: %v; the connection already seen lost: %v (want the Lock back first)", r.Err, seenLost)
	}
	d.setCut(false)
}

// TestNodePathIsWhereTheLockLives: a held lock is one contender under
// NodePath, named as the layout says, and the fake's ExpireLock, which
// finds the holder through the same layout, ends the lease. A change of
// the layout on either side fails here.
func TestNodePathIsWhereTheLockLives(t *testing.T) {
	t.Parallel()
	z := zkfake.New(t, zkfake.ForceMinizk(), zkfake.TickTime(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn, _, err := z.Connect(sessionTimeout)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(conn, "orders/42", append(z.LockOptions(), locks.WithTTL(sessionTimeout))...)
	if err != nil {
		t.Fatal(err)
	}
	node := NodePath(z.Prefix(), "orders/42")
	if l.NodePath() != node {
		t.Fatalf("Locker.NodePath() = %q, NodePath = %q", l.NodePath(), node)
	}
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	kids, _, err := conn.Children(node)
	if err != nil {
		t.Fatalf("children of %s: %v", node, err)
	}
	if len(kids) != 1 || !regexp.MustCompile(`^_c_[0-9a-f]{32}-lock-[0-9]{10}$`).MatchString(kids[0]) {
		t.Fatalf("children of %s = %q, want the holder's contender alone", node, kids)
	}
	locktest.ExpiredFromOutside(t, lease, func(ctx context.Context) error { return z.ExpireLock(ctx, "orders/42") }, fakes.ErrNoHolder)
}

// reconnecting is a connection through a faultDialer whose reconnections
// a test can wait for.
type reconnecting struct {
	conn     *zk.Conn
	d        *faultDialer
	sessions chan int64 // the session of each reconnection
}

func (s *zkServer) reconnecting(t *testing.T) *reconnecting {
	t.Helper()
	r := &reconnecting{d: &faultDialer{}, sessions: make(chan int64, 16)}
	first := true
	r.conn = s.connectWith(t, connOpts{dialer: r.d, events: func(e zk.Event) {
		if e.Type == zk.EventSession && e.State == zk.StateHasSession {
			if first { // the connect itself, seen by connectWith
				first = false
				return
			}
			select {
			case r.sessions <- r.conn.SessionID():
			default:
			}
		}
	}})
	return r
}

// heldAndReconnecting returns the test's server, a connection and the
// lock name on it, held through that connection, and a second connection
// whose reconnections the test can wait for.
func heldAndReconnecting(t *testing.T, name string) (*zkServer, *zk.Conn, *Locker, locks.Lease, *reconnecting) {
	t.Helper()
	s := server(t)
	conn := s.connect(t)
	l := s.newLocker(t, conn, name)
	return s, conn, l, locktest.MustLock(t, l), s.reconnecting(t)
}

// heal ends a cut of the network and resets the connection that was cut
// (go-zookeeper would find it dead after 2/3 of the session timeout); it
// returns once the connection is back, and fails the test unless it is
// back with the same session: the session, and its nodes, lived on.
func (r *reconnecting) heal(t *testing.T) {
	t.Helper()
	session := r.conn.SessionID()
	r.d.setCut(false)
	r.d.reset()
	select {
	case got := <-r.sessions:
		if got != session {
			t.Fatalf("reconnected with session %x, not %x: the session did not live on", got, session)
		}
	case <-time.After(testTimeout):
		t.Fatal("the connection did not come back")
	}
}

// awaitLost waits until a delete was lost in the cut.
func awaitLost(t *testing.T, lost <-chan struct{}) {
	t.Helper()
	select {
	case <-lost:
	case <-time.After(testTimeout):
		t.Fatal("no delete was sent into the cut")
	}
}

// awaitFree waits up to twice the session timeout for the lock to have no
// child, and fails the test with the children left otherwise.
func awaitFree(t *testing.T, conn *zk.Conn, l *Locker, why string) {
	t.Helper()
	give := time.After(2 * sessionTimeout)
	for {
		kids, _, ch, err := conn.ChildrenW(l.NodePath())
		if err != nil {
			t.Fatalf("watch the children of %s: %v", l.NodePath(), err)
		}
		if len(kids) == 0 {
			return
		}
		select {
		case <-ch:
		case <-give:
			t.Fatalf("%s: children %v still there %v later, their session alive: the lock is never free again", why, kids, 2*sessionTimeout)
		}
	}
}

// TestCleanUpLostWithTheConnectionIsSentAgain: a waiter gives up while its
// connection is cut off, so the delete of its node is lost on the way; the
// connection is then reset, and go-zookeeper reconnects with the same
// session, which keeps the node. The delete must be sent again once the
// connection is back: the node would otherwise stand ahead of every later
// contender for as long as the session lives, and the lock, once its holder
// unlocked, would never be free again. (Found by lockproof check's
// zklock/network cell, where a reset connection lost such deletes and the
// suite's live sessions kept the nodes.)
func TestCleanUpLostWithTheConnectionIsSentAgain(t *testing.T) {
	t.Parallel()
	skipReconnectsUnderRace(t)
	s, conn, l, holder, w := heldAndReconnecting(t, "resent")
	watching := make(chan struct{}, 1)
	gate := gateFunc(func(_ context.Context, what string) func() {
		return func() {
			if what == "zk getData" { // the watch on the holder's node is set
				select {
				case watching <- struct{}{}:
				default:
				}
			}
		}
	})
	ctx, cancel := context.WithCancel(locks.WithGate(context.Background(), gate))
	defer cancel()
	res := locktest.LockAsync(ctx, s.newLocker(t, w.conn, "resent"))
	select {
	case <-watching:
	case <-time.After(testTimeout):
		t.Fatal("the waiter never watched the holder's node")
	}
	lost := w.d.watchLostDeletes()
	w.d.setCut(true)
	cancel() // the waiter deletes its node: the request is lost
	if r := locktest.Receive(t, res); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v, want context.Canceled", r.Err)
	}
	awaitLost(t, lost)
	w.heal(t)
	locktest.UnlockOnce(t, holder)
	awaitFree(t, conn, l, "after the holder unlocked and the waiter gave up")
}

// TestEndedLeaseCleanUpLostWithTheConnectionIsSentAgain: the same for the
// delete of a lease's monitor: the lease ends at its deadline (no
// watchdog) while the connection is cut off, the monitor's delete is lost,
// the connection comes back with the same session, and the node must go.
func TestEndedLeaseCleanUpLostWithTheConnectionIsSentAgain(t *testing.T) {
	t.Parallel()
	skipReconnectsUnderRace(t)
	s := server(t)
	clock := fakes.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := s.reconnecting(t)
	l := s.newLocker(t, h.conn, "monitor", locks.WithClock(clock), locks.WithWatchdog(false))
	lease := locktest.MustLock(t, l)
	lost := h.d.watchLostDeletes()
	h.d.setCut(true)
	clock.Advance(sessionTimeout) // past the lease's deadline: Done closes, the monitor deletes the node
	select {
	case <-lease.Done():
	case <-time.After(testTimeout):
		t.Fatal("the lease did not end at its deadline")
	}
	awaitLost(t, lost)
	h.heal(t)
	awaitFree(t, s.connect(t), l, "after the lease ended")
}

// TestCutOffCreateCleanUpGoesOnAfterItsLookUpTimesOut: a Lock whose create
// reached the server, but whose reply was lost, gives up (its ctx ends);
// the create fails later with the connection, so the Lock's clean-up looks
// for the node by its GUID, and that look-up runs out of time while the
// connection is still coming back. The connection then comes back with the
// same session, which keeps the node: the look-up must be made again, and
// the node deleted. (A deadlock-freedom violation of lockproof check's
// zklock/network cell, seed 2878081636866457993, traced: a client whose
// replies were dropped, its connection reset at the heal, its look-up cut
// off at the cell's 30 ms request timeout; the node left was that
// create's, its session alive.)
func TestCutOffCreateCleanUpGoesOnAfterItsLookUpTimesOut(t *testing.T) {
	t.Parallel()
	skipReconnectsUnderRace(t)
	s, conn, l, holder, w := heldAndReconnecting(t, "lookup")
	logged := make(chan struct{}, 1)
	logger := slog.New(slog.NewTextHandler(signalWriter(logged), &slog.HandlerOptions{Level: slog.LevelDebug}))
	waiter := s.newLocker(t, w.conn, "lookup", locks.WithRequestTimeout(50*time.Millisecond), locks.WithLogger(logger))
	gate := gateFunc(func(_ context.Context, what string) func() {
		if what == "zk create" {
			w.d.muteReplies(true) // the create goes through, its reply is lost
		}
		return func() {}
	})
	ctx, cancel := context.WithCancel(locks.WithGate(context.Background(), gate))
	defer cancel()
	res := locktest.LockAsync(ctx, waiter)
	waitChildren(t, conn, l, 2) // the create took effect
	cancel()
	if r := locktest.Receive(t, res); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v, want context.Canceled", r.Err)
	}
	session := w.conn.SessionID()
	w.d.reset() // the create fails with the connection; the redial's handshake goes unanswered
	select {
	case <-logged: // the look-up gave up (this Locker logs nothing else)
	case <-time.After(testTimeout):
		t.Fatal("the clean-up's look-up never gave up")
	}
	w.d.muteReplies(false)
	w.d.reset() // the handshake's reply was lost: dial again
	select {
	case got := <-w.sessions:
		if got != session {
			t.Fatalf("reconnected with session %x, not %x: the session did not live on", got, session)
		}
	case <-time.After(testTimeout):
		t.Fatal("the connection did not come back")
	}
	locktest.UnlockOnce(t, holder)
	awaitFree(t, conn, l, "after the holder unlocked and the waiter gave up")
}

// signalWriter is an io.Writer that signals ch (without blocking) at every
// write.
type signalWriter chan struct{}

func (w signalWriter) Write(p []byte) (int, error) {
	select {
	case w <- struct{}{}:
	default:
	}
	return len(p), nil
}
