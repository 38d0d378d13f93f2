package zklock

import (
	"cmp"
	"context"
	"errors"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/minizk"
	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// The read-write mutex's tests run on minizk in manual time: every client
// comes from ConnectManual with a session of an hour, which the manual
// clock never reaches unless a test says so, and every lease has a TTL of
// rwTTL on that clock. Nothing here waits out a timer: a waiter returns
// when a watch fires.
const (
	rwSession = time.Hour
	rwTTL     = 10 * time.Second
)

// manualZK returns minizk in manual time for one test.
func manualZK(t testing.TB) *zkfake.Server {
	t.Helper()
	return zkfake.New(t, zkfake.ForceMinizk(), zkfake.TickTime(rwSession/20),
		zkfake.ManualTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
}

// rwClient is one client of the test's read-write mutex "cfg": a
// connection of its own and the mutex on it.
type rwClient struct {
	conn *zk.Conn
	m    *RWMutex
}

func newRWClient(t testing.TB, z *zkfake.Server, opts ...locks.Option) rwClient {
	t.Helper()
	conn, err := z.ConnectManual(z.Addr(), rwSession, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := append(append(z.LockOptions(), locks.WithTTL(rwTTL)), opts...)
	m, err := NewRWMutex(conn, "cfg", all...)
	if err != nil {
		t.Fatalf("NewRWMutex: %v", err)
	}
	return rwClient{conn: conn, m: m}
}

// rwClients returns n clients of the test's mutex, one connection each.
func rwClients(t testing.TB, z *zkfake.Server, n int) []rwClient {
	t.Helper()
	out := make([]rwClient, n)
	for i := range out {
		out[i] = newRWClient(t, z)
	}
	return out
}

// queue returns the mutex's contenders, in queue order, as minizk lists
// them, once there are n: it waits (on the server's changes, no polling)
// until then.
func queue(t testing.TB, z *zkfake.Server, m *RWMutex, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := z.Minizk().WaitFor(ctx, func(v minizk.View) bool { return v.NumChildren(m.NodePath()) == n })
	kids, lerr := z.Minizk().Children(m.NodePath())
	if n == 0 && errors.Is(lerr, minizk.ErrNoNode) {
		return nil
	}
	if err != nil || lerr != nil {
		t.Fatalf("waiting for %d contenders of %s (have %v): %v %v", n, m.NodePath(), kids, err, lerr)
	}
	seq := func(k string) int64 { s, _, _ := layout.ZKRWSequence(k); return s }
	slices.SortFunc(kids, func(a, b string) int { return cmp.Compare(seq(a), seq(b)) })
	return kids
}

// watches waits until the contenders kids of m (in queue order) have
// want data watches each, from minizk's counts; it fails the test with the
// counts it last saw after testTimeout. Every waiter watches its own node
// and what it waits for; a holder watches its own node, or, if it found
// its node alone, the lock node's children until the next change to them.
func watches(t testing.TB, z *zkfake.Server, m *RWMutex, kids []string, want ...int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := z.Minizk().WaitFor(ctx, func(v minizk.View) bool {
		for i, k := range kids {
			if data, _ := v.Watches(m.NodePath() + "/" + k); data != want[i] {
				return false
			}
		}
		return true
	})
	if err != nil {
		got := make([]int, len(kids))
		for i, k := range kids {
			got[i], _ = z.Minizk().Watches(m.NodePath() + "/" + k)
		}
		t.Fatalf("data watches on %v = %v, want %v", kids, got, want)
	}
}

// childWatches waits until m's node has want watches on its children,
// from minizk's counts; it fails the test after testTimeout.
func childWatches(t testing.TB, z *zkfake.Server, m *RWMutex, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := z.Minizk().WaitFor(ctx, func(v minizk.View) bool {
		_, child := v.Watches(m.NodePath())
		return child == want
	})
	if err != nil {
		_, got := z.Minizk().Watches(m.NodePath())
		t.Fatalf("child watches on %s = %d, want %d", m.NodePath(), got, want)
	}
}

// refusedTry checks that a TryLock through l is refused with
// locks.ErrLocked.
func refusedTry(t testing.TB, l locks.Locker) {
	t.Helper()
	if lease, err := l.TryLock(context.Background()); !errors.Is(err, locks.ErrLocked) {
		if lease != nil {
			_ = lease.Unlock(context.Background())
		}
		t.Fatalf("TryLock: %v, want ErrLocked", err)
	}
}

// granted receives a LockAsync's result and fails the test unless it
// holds with a token above after's.
func granted(t testing.TB, ch <-chan locktest.Result, after locks.Lease) locks.Lease {
	t.Helper()
	r := locktest.Receive(t, ch)
	if r.Err != nil {
		t.Fatalf("Lock: %v", r.Err)
	}
	if after != nil && locktest.Token(t, r.Lease) <= locktest.Token(t, after) {
		t.Fatalf("token %v not above %v", locktest.Token(t, r.Lease), locktest.Token(t, after))
	}
	return r.Lease
}

// stillWaiting fails the test if a LockAsync has returned.
func stillWaiting(t testing.TB, what string, ch <-chan locktest.Result) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned while it should wait: %v", what, r.Err)
	default:
	}
}

func TestNewRWMutexValidates(t *testing.T) {
	z := manualZK(t)
	conn, err := z.ConnectManual(z.Addr(), rwSession, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewRWMutex(nil, "cfg"); !errors.Is(err, locks.ErrNilClient) {
		t.Errorf("nil connection: %v, want ErrNilClient", err)
	}
	if _, err := NewRWMutex(conn, ""); err == nil {
		t.Error("empty name accepted")
	}
	if _, err := NewRWMutex(conn, "cfg", locks.WithPrefix("relative")); !errors.Is(err, locks.ErrInvalidOption) {
		t.Errorf("relative prefix: %v, want ErrInvalidOption", err)
	}
	m, err := NewRWMutex(conn, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "a/b" || m.NodePath() != DefaultRWPrefix+"/a%2Fb" {
		t.Errorf("Name %q, NodePath %q", m.Name(), m.NodePath())
	}
}

// TestRWMutexReadersShareWriterExcludes: two readers hold at once with
// growing tokens while a writer's TryLock is refused and leaves no node;
// once they are gone a writer holds, above them, and keeps readers and
// writers out; the next reader's token is above the writer's.
func TestRWMutexReadersShareWriterExcludes(t *testing.T) {
	z := manualZK(t)
	c := rwClients(t, z, 3)
	r1 := locktest.MustTryLock(t, c[0].m.RLocker())
	r2 := locktest.MustTryLock(t, c[1].m.RLocker())
	if locktest.Token(t, r2) <= locktest.Token(t, r1) {
		t.Fatal("the second reader's token is not above the first's")
	}
	refusedTry(t, c[2].m.Locker())
	queue(t, z, c[0].m, 2) // the refused writer's node is gone
	locktest.UnlockOnce(t, r1)
	locktest.UnlockOnce(t, r2)

	w := locktest.MustTryLock(t, c[2].m.Locker())
	if locktest.Token(t, w) <= locktest.Token(t, r2) {
		t.Fatal("the writer's token is not above the readers'")
	}
	refusedTry(t, c[0].m.RLocker())
	refusedTry(t, c[1].m.Locker())
	queue(t, z, c[0].m, 1)
	locktest.UnlockOnce(t, w)

	r3 := locktest.MustLock(t, c[0].m.RLocker())
	if locktest.Token(t, r3) <= locktest.Token(t, w) {
		t.Fatal("the next reader's token is not above the writer's")
	}
	locktest.UnlockOnce(t, r3)
	queue(t, z, c[0].m, 0)
}

// TestRWMutexQueueWatchesOnlyWhatItMust: behind a reader holding, the
// queue is writer, reader, reader, writer, reader. Each waiter watches one
// node, the right one (a writer the one just ahead, a reader the newest
// writer ahead: kazoo's reader once took a writer behind it for one,
// python-zk/kazoo#649), which minizk's watch counts show. Then the queue
// is served in order: the first writer, both readers together (a later
// reader's TryLock refused, as a writer waits behind them: writers are not
// starved), the second writer, the last reader; tokens grow grant by grant
// across modes.
func TestRWMutexQueueWatchesOnlyWhatItMust(t *testing.T) {
	z := manualZK(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c := rwClients(t, z, 7)
	m := c[0].m
	r1 := locktest.MustTryLock(t, m.RLocker())
	w1 := locktest.LockAsync(ctx, c[1].m.Locker())
	queue(t, z, m, 2)
	r2 := locktest.LockAsync(ctx, c[2].m.RLocker())
	queue(t, z, m, 3)
	r3 := locktest.LockAsync(ctx, c[3].m.RLocker())
	queue(t, z, m, 4)
	w2 := locktest.LockAsync(ctx, c[4].m.Locker())
	queue(t, z, m, 5)
	r4 := locktest.LockAsync(ctx, c[5].m.RLocker())
	kids := queue(t, z, m, 6)

	// Data watches per node, each from a connection of its own: every
	// contender's on its own node (a waiter's read while it waits; r1,
	// which found its node alone, watched the children, and watches its
	// node since w1's came), and w1's on r1; r2's and r3's on w1; w2's on
	// r3; r4's on w2.
	watches(t, z, m, kids, 2, 3, 1, 2, 2, 1)

	locktest.UnlockOnce(t, r1)
	w1Lease := granted(t, w1, r1)
	stillWaiting(t, "a reader behind the writer", r2)
	locktest.UnlockOnce(t, w1Lease)
	r2Lease, r3Lease := granted(t, r2, w1Lease), granted(t, r3, w1Lease)
	refusedTry(t, c[6].m.RLocker())
	stillWaiting(t, "the reader behind the second writer", r4)
	locktest.UnlockOnce(t, r2Lease)
	stillWaiting(t, "the second writer, a reader still in", w2)
	locktest.UnlockOnce(t, r3Lease)
	w2Lease := granted(t, w2, r3Lease)
	locktest.UnlockOnce(t, w2Lease)
	locktest.UnlockOnce(t, granted(t, r4, w2Lease))
	queue(t, z, m, 0)
}

// TestRWMutexCancelledWaitersLeaveNothing: a writer waiting behind a
// reader gives up: its node goes, and the reader queued behind it, which
// watched it, holds at once beside the first; a reader waiting behind a
// writer gives up, and a refused TryLock in either mode leaves nothing.
func TestRWMutexCancelledWaitersLeaveNothing(t *testing.T) {
	z := manualZK(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c := rwClients(t, z, 3)
	m := c[0].m
	r1 := locktest.MustTryLock(t, m.RLocker())
	wctx, wcancel := context.WithCancel(ctx)
	w := locktest.LockAsync(wctx, c[1].m.Locker())
	queue(t, z, m, 2)
	r2 := locktest.LockAsync(ctx, c[2].m.RLocker())
	queue(t, z, m, 3)
	wcancel()
	if r := locktest.Receive(t, w); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("the cancelled writer: %v, want context.Canceled", r.Err)
	}
	r2Lease := granted(t, r2, r1)
	refusedTry(t, c[1].m.Locker())
	queue(t, z, m, 2)
	locktest.UnlockOnce(t, r1)
	locktest.UnlockOnce(t, r2Lease)

	held := locktest.MustLock(t, c[1].m.Locker())
	rctx, rcancel := context.WithCancel(ctx)
	r := locktest.LockAsync(rctx, c[0].m.RLocker())
	queue(t, z, m, 2)
	rcancel()
	if res := locktest.Receive(t, r); !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("the cancelled reader: %v, want context.Canceled", res.Err)
	}
	refusedTry(t, c[2].m.RLocker())
	refusedTry(t, c[2].m.Locker())
	if kids := queue(t, z, m, 1); len(kids) != 1 {
		t.Fatalf("contenders %v, want the writer's alone", kids)
	}
	locktest.UnlockOnce(t, held)
	queue(t, z, m, 0)
}

// TestRWMutexSessionExpiryFrees: the writer's session expires on the
// server; its node goes with it, its lease says so (Done, ErrNotHeld),
// the two readers queued behind it hold with greater tokens, and the
// writer behind them still waits until they unlock.
func TestRWMutexSessionExpiryFrees(t *testing.T) {
	skipReconnectsUnderRace(t)
	z := manualZK(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c := rwClients(t, z, 4)
	m := c[0].m
	w := locktest.MustTryLock(t, m.Locker())
	r1 := locktest.LockAsync(ctx, c[1].m.RLocker())
	queue(t, z, m, 2)
	r2 := locktest.LockAsync(ctx, c[2].m.RLocker())
	queue(t, z, m, 3)
	w2 := locktest.LockAsync(ctx, c[3].m.Locker())
	// Every watch set before the expiry (the holder's lease watches its
	// node, and learns of the expiry that way): a watch request in flight
	// as the connection drops would be tried again after a pause on the
	// manual clock, which nothing here moves.
	watches(t, z, m, queue(t, z, m, 4), 3, 1, 2, 1)

	if err := z.ExpireSession(c[0].conn.SessionID()); err != nil {
		t.Fatal(err)
	}
	locktest.Closed(t, "the expired writer's Done", w.Done())
	// ErrNotHeld: ErrSessionLost too when the lease learns of the expiry
	// first, not of its node's deletion (minizk sends both).
	if err := w.Err(); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("the expired writer's Err = %v, want ErrNotHeld", err)
	}
	r1Lease, r2Lease := granted(t, r1, w), granted(t, r2, w)
	stillWaiting(t, "the writer behind the readers", w2)
	if err := w.Unlock(ctx); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Unlock of the lost lease = %v, want ErrNotHeld", err)
	}
	locktest.UnlockOnce(t, r1Lease)
	locktest.UnlockOnce(t, r2Lease)
	locktest.UnlockOnce(t, granted(t, w2, r2Lease))
}

// TestRWNodePathIsWhereTheLockLives: the contenders are children of
// NodePath named as the layout says, a reader's and a writer's apart, and
// the fake's ExpireLock, which finds the holder through the same layout,
// ends a reader's lease and a writer's.
func TestRWNodePathIsWhereTheLockLives(t *testing.T) {
	skipReconnectsUnderRace(t)
	z := manualZK(t)
	c := newRWClient(t, z)
	if node := NodePath(z.Prefix(), "cfg"); c.m.NodePath() != node {
		t.Fatalf("RWMutex.NodePath() = %q, NodePath = %q", c.m.NodePath(), node)
	}
	for _, v := range []struct {
		l    locks.Locker
		name string
	}{
		{c.m.RLocker(), `^_c_[0-9a-f]{32}-__READ__[0-9]{10}$`},
		{c.m.Locker(), `^_c_[0-9a-f]{32}-__WRIT__[0-9]{10}$`},
	} {
		lease := locktest.MustTryLock(t, v.l)
		kids := queue(t, z, c.m, 1)
		if !regexp.MustCompile(v.name).MatchString(kids[0]) {
			t.Fatalf("the contender is %q, want it to match %s", kids[0], v.name)
		}
		childWatches(t, z, c.m, 1) // the lease's, the contender having found its node alone
		locktest.ExpiredFromOutside(t, lease, func(ctx context.Context) error { return z.ExpireLock(ctx, "cfg") }, fakes.ErrNoHolder)
	}
}

// TestRWMutexMaxHold: a reader's lease bounded by WithMaxHold ends at the
// bound on the manual clock, and the writers, refused until then, get the
// lock after it, with a greater token.
func TestRWMutexMaxHold(t *testing.T) {
	z := manualZK(t)
	bound := rwTTL / 4
	locktest.MaxHold(t, z.Clock(), z.Advance, bound,
		newRWClient(t, z, locks.WithMaxHold(bound)).m.RLocker(),
		newRWClient(t, z).m.Locker(), newRWClient(t, z).m.Locker())
}

// TestRWMutexReentrantByOwner: WithOwner re-enters a writer's acquisition
// through its view, as the mutex's.
func TestRWMutexReentrantByOwner(t *testing.T) {
	z := manualZK(t)
	locktest.Reentrant(t, newRWClient(t, z, locks.WithOwner("job-7")).m.Locker(),
		newRWClient(t, z).m.Locker(), newRWClient(t, z, locks.WithOwner("job-7")).m.Locker())
}

// TestRWMutexReadersOrOneWriter: in real time on minizk, goroutines of two
// reading and two writing clients contend: a writer is never inside with
// anyone.
func TestRWMutexReadersOrOneWriter(t *testing.T) {
	s := server(t)
	var readers, writers []locks.Locker
	for i := range 4 {
		m, err := NewRWMutex(s.connect(t), "cfg", locks.WithTTL(sessionTimeout), locks.WithPrefix(s.prefix))
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			readers = append(readers, m.RLocker())
		} else {
			writers = append(writers, m.Locker())
		}
	}
	most := locktest.ReadersOrOneWriter(t, readers, writers, 2, 10, 200*time.Microsecond)
	t.Logf("at most %d readers at once", most)
}

// TestRWTryLockRefusedBehindALateWriter: a writer's node is created between
// a reader's TryLock's look at the children and its create, so it lands
// ahead of the reader's: the reader is refused and deletes its node, which
// leaves the writer's alone; a writer's TryLock behind a reader that came
// so late is refused too.
func TestRWTryLockRefusedBehindALateWriter(t *testing.T) {
	z := manualZK(t)
	a, b := newRWClient(t, z), newRWClient(t, z)
	for _, v := range []struct {
		try, rival *Locker
	}{
		{a.m.read, b.m.write},
		{a.m.write, b.m.read},
	} {
		locktest.UnlockOnce(t, locktest.MustTryLock(t, v.try)) // the lock's node exists from now on
		var once sync.Once
		var rival string
		gate := gateFunc(func(_ context.Context, what string) func() {
			if what == "zk create" {
				once.Do(func() {
					c := newContender(v.rival)
					var err error
					if rival, err = b.conn.Create(c.prefix, nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll)); err != nil {
						t.Errorf("create the rival: %v", err)
					}
				})
			}
			return func() {}
		})
		if _, err := v.try.TryLock(locks.WithGate(context.Background(), gate)); !errors.Is(err, locks.ErrLocked) {
			t.Fatalf("TryLock behind a rival: %v, want ErrLocked", err)
		}
		if kids := queue(t, z, a.m, 1); a.m.NodePath()+"/"+kids[0] != rival {
			t.Fatalf("contenders %v, want the rival's alone (%s)", kids, rival)
		}
		if err := b.conn.Delete(rival, -1); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRWMutexQueueInRealTime is the queue's order on the test's server,
// which is a real ZooKeeper with LOCKPROOF_ZK_ADDR (the tests above need
// minizk's manual time and watch counts): a reader holds, a writer queues
// behind it and a reader behind the writer; a later reader's TryLock is
// refused; the writer holds once the first reader is gone, the second
// reader once the writer is, with growing tokens.
func TestRWMutexQueueInRealTime(t *testing.T) {
	s := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	newRW := func() *RWMutex {
		m, err := NewRWMutex(s.connect(t), "cfg", locks.WithTTL(sessionTimeout), locks.WithPrefix(s.prefix))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	conn := s.connect(t)
	m := newRW()
	r1 := locktest.MustTryLock(t, m.RLocker())
	w := locktest.LockAsync(ctx, newRW().Locker())
	waitChildren(t, conn, m.read, 2)
	r2 := locktest.LockAsync(ctx, newRW().RLocker())
	waitChildren(t, conn, m.read, 3)
	refusedTry(t, newRW().RLocker())
	stillWaiting(t, "the writer", w)
	locktest.UnlockOnce(t, r1)
	wLease := granted(t, w, r1)
	stillWaiting(t, "the reader behind the writer", r2)
	locktest.UnlockOnce(t, wLease)
	locktest.UnlockOnce(t, granted(t, r2, wLease))
	waitChildren(t, conn, m.read, 0)
}
