package consullock

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// newRW returns the read-write mutex "cfg" on a client of its own, as
// another process would have.
func newRW(t testing.TB, c *consulfake.Server, s Session, opts ...locks.Option) *RWMutex {
	t.Helper()
	m, err := NewRWMutexWithSession(c.NewClient(), "cfg", s, append(c.LockOptions(), opts...)...)
	if err != nil {
		t.Fatalf("NewRWMutexWithSession: %v", err)
	}
	return m
}

// readerKeys lists the mutex's readers' keys and returns them with the
// index a blocking query on them parks at.
func readerKeys(t testing.TB, c *consulfake.Server, m *RWMutex) (api.KVPairs, uint64) {
	t.Helper()
	pairs, meta, err := c.Client().KV().List(m.readers, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pairs, meta.LastIndex
}

// writerKey returns the session holding the writer's key ("" if none) and
// the key's index.
func writerKey(t testing.TB, c *consulfake.Server, m *RWMutex) (string, uint64) {
	t.Helper()
	return holder(t, c, m.write)
}

func refusedTry(t testing.TB, l locks.Locker) {
	t.Helper()
	if lease, err := l.TryLock(context.Background()); !errors.Is(err, locks.ErrLocked) {
		if lease != nil {
			_ = lease.Unlock(context.Background())
		}
		t.Fatalf("TryLock: %v, want ErrLocked", err)
	}
}

// pending fails the test if a Lock started by LockAsync has returned.
func pending(t testing.TB, what string, ch <-chan locktest.Result) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned early: %v", what, r.Err)
	default:
	}
}

// nothingLeft checks that no session, reader's key or queue entry is left.
func nothingLeft(t testing.TB, c *consulfake.Server, m *RWMutex) {
	t.Helper()
	if got := sessions(t, c); len(got) != 0 {
		t.Errorf("sessions left: %v", got)
	}
	if pairs, _ := readerKeys(t, c, m); len(pairs) != 0 {
		t.Errorf("%d readers' keys left, first %q", len(pairs), pairs[0].Key)
	}
	if left := queueEntries(t, c, m.read); len(left) != 0 {
		t.Errorf("%d queue entries left, first %q", len(left), left[0].Key)
	}
}

func TestNewRWMutexValidates(t *testing.T) {
	c := server(t)
	if _, err := NewRWMutex(nil, "cfg"); !errors.Is(err, locks.ErrNilClient) {
		t.Errorf("nil client: %v, want ErrNilClient", err)
	}
	if _, err := NewRWMutex(c.Client(), "a/.reader/b"); !errors.Is(err, locks.ErrInvalidName) {
		t.Errorf("a name with a reader segment: %v, want ErrInvalidName", err)
	}
	if _, err := NewRWMutex(c.Client(), "cfg", locks.WithTTL(time.Second)); !errors.Is(err, locks.ErrInvalidTTL) {
		t.Errorf("1s TTL: %v, want ErrInvalidTTL", err)
	}
	m, err := NewRWMutex(c.Client(), "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "cfg" || m.Key() != DefaultRWPrefix+"cfg" {
		t.Errorf("Name %q, Key %q", m.Name(), m.Key())
	}
	w, r, q := RWKeys("p/", "cfg")
	if w != "p/cfg" || r != "p/cfg/.reader/" || q != "p/cfg/.queue/" {
		t.Errorf("RWKeys = %q, %q, %q", w, r, q)
	}
}

// TestRWMutexReadersShareWriterExcludes: two readers hold at once, through
// different RWMutexes; a writer is refused until both unlock, and then
// readers and writers are refused; every grant's token is above the one
// before, in either mode; nothing is left on the server at the end.
func TestRWMutexReadersShareWriterExcludes(t *testing.T) {
	c := server(t, consulfake.ForceMiniconsul()) // WaitParked orders its steps: miniconsul only
	a, b := newRW(t, c, Session{}), newRW(t, c, Session{})
	r1 := locktest.MustTryLock(t, a.RLocker())
	r2 := locktest.MustTryLock(t, b.RLocker())
	if token(t, r2) <= token(t, r1) {
		t.Fatal("the second reader's token is not above the first's")
	}
	if pairs, _ := readerKeys(t, c, a); len(pairs) != 2 {
		t.Fatalf("%d readers' keys while two read, want 2", len(pairs))
	}
	if sess, _ := writerKey(t, c, a); sess != "" {
		t.Fatalf("the writer's key is held by %q while only readers hold", sess)
	}
	refusedTry(t, a.Locker())
	locktest.UnlockOnce(t, r1)
	refusedTry(t, b.Locker())
	locktest.UnlockOnce(t, r2)
	w := locktest.MustTryLock(t, b.Locker())
	if token(t, w) <= token(t, r2) {
		t.Fatal("the writer's token is not above the readers'")
	}
	refusedTry(t, a.RLocker())
	refusedTry(t, a.Locker())
	locktest.UnlockOnce(t, w)
	r3 := locktest.MustTryLock(t, a.RLocker())
	if token(t, r3) <= token(t, w) {
		t.Fatal("the reader's token is not above the writer's")
	}
	w2 := locktest.LockAsync(context.Background(), b.Locker())
	_, idx := readerKeys(t, c, a)
	c.WaitParked("", idx, 1) // the writer waits for the reader to leave
	locktest.UnlockOnce(t, r3)
	got := locktest.Receive(t, w2)
	if got.Err != nil {
		t.Fatalf("writer's Lock: %v", got.Err)
	}
	if token(t, got.Lease) <= token(t, r3) {
		t.Fatal("the waiting writer's token is not above the reader's")
	}
	locktest.UnlockOnce(t, got.Lease)
	nothingLeft(t, c, a)
}

// TestRWMutexWaitingWriterIsNotStarved: two readers hold; a writer's Lock
// waits for them, and meanwhile turns a new reader's TryLock away and
// makes three readers' Lock calls queue. The two readers' unlocks let the
// writer in, not the queued readers; its unlock lets the three in, who then
// hold together. The clock never moves: every hand-off is notified.
func TestRWMutexWaitingWriterIsNotStarved(t *testing.T) {
	c := server(t, consulfake.ForceMiniconsul()) // WaitParked orders its steps: miniconsul only
	m := newRW(t, c, Session{})
	r1 := locktest.MustTryLock(t, m.RLocker())
	r2 := locktest.MustTryLock(t, newRW(t, c, Session{}).RLocker())
	writer := locktest.LockAsync(context.Background(), newRW(t, c, Session{}).Locker())
	_, idx := readerKeys(t, c, m)
	c.WaitParked("", idx, 1) // the writer holds its key and waits for the readers
	if sess, _ := writerKey(t, c, m); sess == "" {
		t.Fatal("the waiting writer does not hold the writer's key")
	}
	refusedTry(t, newRW(t, c, Session{}).RLocker())
	var readers []<-chan locktest.Result
	for range 3 {
		readers = append(readers, locktest.LockAsync(context.Background(), newRW(t, c, Session{}).RLocker()))
	}
	waitEntries(t, c, m.read, 3)
	locktest.UnlockOnce(t, r1)
	_, idx = readerKeys(t, c, m)
	c.WaitParked("", idx, 1)
	pending(t, "the writer's Lock, with a reader holding", writer)
	locktest.UnlockOnce(t, r2)
	w := locktest.Receive(t, writer)
	if w.Err != nil {
		t.Fatalf("writer's Lock: %v", w.Err)
	}
	if token(t, w.Lease) <= token(t, r2) {
		t.Fatal("the writer's token is not above the readers'")
	}
	for _, r := range readers {
		pending(t, "a queued reader's Lock, with the writer holding", r)
	}
	locktest.UnlockOnce(t, w.Lease)
	var held []locks.Lease
	for _, ch := range readers {
		r := locktest.Receive(t, ch)
		if r.Err != nil {
			t.Fatalf("queued reader's Lock: %v", r.Err)
		}
		if token(t, r.Lease) <= token(t, w.Lease) {
			t.Fatal("a queued reader's token is not above the writer's")
		}
		held = append(held, r.Lease)
	}
	for _, r := range held {
		if err := r.Err(); err != nil {
			t.Fatalf("a reader lost its lease while the others held: %v", err)
		}
	}
	if !c.Clock().Now().Equal(epoch) {
		t.Fatalf("time moved by %v", c.Clock().Now().Sub(epoch))
	}
	for _, r := range held {
		locktest.UnlockOnce(t, r)
	}
	nothingLeft(t, c, m)
}

// TestRWMutexInvalidatedReaderKeepsWriterOut: a reader's session is
// invalidated on the server (its node failed, say) while a writer waits:
// the reader's key is released, but the reader may still believe in its
// lease until its local deadline, so the writer must wait out the
// lock-delay, which Consul enforces when the writer probes the released
// key. A writer that took a released key for a reader gone would be
// granted at once.
func TestRWMutexInvalidatedReaderKeepsWriterOut(t *testing.T) {
	c := server(t, consulfake.ForceMiniconsul())
	const delay = 2 * time.Second
	s := Session{LockDelay: delay}
	m := newRW(t, c, s)
	r := locktest.MustTryLock(t, m.RLocker())
	writer := locktest.LockAsync(context.Background(), newRW(t, c, s).Locker())
	pairs, idx := readerKeys(t, c, m)
	c.WaitParked("", idx, 1)
	if err := c.ExpireSession(pairs[0].Session); err != nil {
		t.Fatal(err)
	}
	locktest.Closed(t, "the invalidated reader's Done", r.Done())
	if !errors.Is(r.Err(), locks.ErrNotHeld) {
		t.Fatalf("the invalidated reader's Err = %v, want ErrNotHeld", r.Err())
	}
	pairs, idx = readerKeys(t, c, m)
	if len(pairs) != 1 || pairs[0].Session != "" {
		t.Fatalf("readers' keys after the invalidation: %+v, want one released", pairs)
	}
	c.WaitParked("", idx, 1) // refused by the lock-delay, the writer waits it out
	pending(t, "the writer's Lock during the reader's lock-delay", writer)
	c.Advance(delay)
	w := locktest.Receive(t, writer)
	if w.Err != nil {
		t.Fatalf("writer's Lock: %v", w.Err)
	}
	if token(t, w.Lease) <= token(t, r) {
		t.Fatal("the writer's token is not above the dead reader's")
	}
	if err := r.Unlock(context.Background()); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("the dead reader's Unlock: %v, want ErrNotHeld", err)
	}
	locktest.UnlockOnce(t, w.Lease)
	nothingLeft(t, c, m)
}

// TestRWMutexCrashedHoldersExpire: a reader that stops renewing (its
// process crashed) keeps the waiting writer out until Consul invalidates
// its session (TTL×2 after its last renewal) and the lock-delay has passed;
// then a writer that crashes keeps a waiting reader out the same way. The
// waiters' TTL is four times the crashed holders', so that the steps of
// the clock never outrun their renewals.
func TestRWMutexCrashedHoldersExpire(t *testing.T) {
	c := shortTTLServer(t)
	const delay = 300 * time.Millisecond
	s := Session{LockDelay: delay, TTLMin: shortTTL}
	waiting := shortTTLOptions(locks.WithTTL(4 * shortTTL))
	m := newRW(t, c, s, shortTTLOptions(locks.WithWatchdog(false))...)
	crashed := locktest.MustTryLock(t, m.RLocker())
	writer := locktest.LockAsync(context.Background(), newRW(t, c, s, waiting...).Locker())
	_, idx := readerKeys(t, c, m)
	c.WaitParked("", idx, 1)
	advanceUntil(t, c, func() bool {
		pairs, _ := readerKeys(t, c, m)
		return len(pairs) == 1 && pairs[0].Session == ""
	})
	locktest.Closed(t, "the crashed reader's Done", crashed.Done())
	_, idx = readerKeys(t, c, m)
	c.WaitParked("", idx, 1)
	pending(t, "the writer's Lock during the lock-delay", writer)
	c.Advance(delay)
	w := locktest.Receive(t, writer)
	if w.Err != nil {
		t.Fatalf("writer's Lock: %v", w.Err)
	}
	if token(t, w.Lease) <= token(t, crashed) {
		t.Fatal("the writer's token is not above the crashed reader's")
	}
	locktest.UnlockOnce(t, w.Lease)

	crashed = locktest.MustTryLock(t, m.Locker())
	reader := locktest.LockAsync(context.Background(), newRW(t, c, s, waiting...).RLocker())
	_, idx = writerKey(t, c, m)
	c.WaitParked(m.Key(), idx, 2) // the writer's monitor and the reader at the head of the queue
	advanceUntil(t, c, func() bool { sess, _ := writerKey(t, c, m); return sess == "" })
	locktest.Closed(t, "the crashed writer's Done", crashed.Done())
	_, idx = writerKey(t, c, m)
	c.WaitParked(m.Key(), idx, 1)
	pending(t, "the reader's Lock during the lock-delay", reader)
	c.Advance(delay)
	r := locktest.Receive(t, reader)
	if r.Err != nil {
		t.Fatalf("reader's Lock: %v", r.Err)
	}
	if token(t, r.Lease) <= token(t, crashed) {
		t.Fatal("the reader's token is not above the crashed writer's")
	}
	locktest.UnlockOnce(t, r.Lease)
}

// advanceUntil moves the clock of a shortTTL server in steps of a quarter
// TTL, so that waiters keep renewing their sessions, until cond holds (at
// most 12 steps: three TTLs).
func advanceUntil(t *testing.T, c *consulfake.Server, cond func() bool) {
	t.Helper()
	for range 12 {
		if cond() {
			return
		}
		c.Advance(shortTTL / 4)
	}
	if !cond() {
		t.Fatal("the server never invalidated the crashed session")
	}
}

// TestRWMutexCancelledWaiterLeavesNothing: a reader that stops waiting
// behind a writer, and a writer that stops waiting for a reader, leave
// neither a session nor a key in the way: a TryLock right after succeeds.
func TestRWMutexCancelledWaiterLeavesNothing(t *testing.T) {
	c := server(t, consulfake.ForceMiniconsul()) // WaitParked orders its steps: miniconsul only
	m := newRW(t, c, Session{})
	w := locktest.MustTryLock(t, m.Locker())
	ctx, cancel := context.WithCancel(context.Background())
	reader := locktest.LockAsync(ctx, newRW(t, c, Session{}).RLocker())
	_, idx := writerKey(t, c, m)
	c.WaitParked(m.Key(), idx, 2) // the writer's monitor and the waiting reader
	cancel()
	if r := locktest.Receive(t, reader); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("the cancelled reader's Lock: %v, want context.Canceled", r.Err)
	}
	locktest.UnlockOnce(t, w)
	r := locktest.MustTryLock(t, m.RLocker())

	ctx, cancel = context.WithCancel(context.Background())
	writer := locktest.LockAsync(ctx, newRW(t, c, Session{}).Locker())
	_, idx = readerKeys(t, c, m)
	c.WaitParked("", idx, 1) // the writer holds its key, waiting for the reader
	cancel()
	if res := locktest.Receive(t, writer); !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("the cancelled writer's Lock: %v, want context.Canceled", res.Err)
	}
	locktest.UnlockOnce(t, locktest.MustTryLock(t, newRW(t, c, Session{}).RLocker()))
	locktest.UnlockOnce(t, r)
	locktest.UnlockOnce(t, locktest.MustTryLock(t, newRW(t, c, Session{}).Locker()))
	nothingLeft(t, c, m)
}

// TestRWKeysAreWhereTheLockLives: the keys RWKeys names are those the lock
// writes: the writer's key held by a writer's session, a reader's key
// named by its session and held by it, a waiting reader's queue entry; and
// the fake's ExpireLock, which finds the writer's key through the same
// layout, ends a writer's lease.
func TestRWKeysAreWhereTheLockLives(t *testing.T) {
	c := server(t, consulfake.ForceMiniconsul()) // WaitParked orders its steps: miniconsul only
	writerK, readersP, queueP := RWKeys(c.Prefix(), "orders/42")
	m, err := NewRWMutexWithSession(c.NewClient(), "orders/42", Session{LockDelay: time.Second}, c.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	if m.Key() != writerK {
		t.Fatalf("Key() = %q, RWKeys' writer %q", m.Key(), writerK)
	}
	r := locktest.MustTryLock(t, m.RLocker())
	pairs, _, err := c.Client().KV().List(readersP, nil)
	if err != nil || len(pairs) != 1 || pairs[0].Session == "" || pairs[0].Key != readersP+pairs[0].Session {
		t.Fatalf("readers' keys under %s while one reads: %+v, %v", readersP, pairs, err)
	}
	locktest.UnlockOnce(t, r)
	w := locktest.MustTryLock(t, m.Locker())
	if kv, _, err := c.Client().KV().Get(writerK, nil); err != nil || kv == nil || kv.Session == "" {
		t.Fatalf("no session holds %s while a writer holds: %+v, %v", writerK, kv, err)
	}
	reader := locktest.LockAsync(context.Background(), m.RLocker())
	var entries api.KVPairs
	waitUntil(t, "the waiting reader's queue entry", func() bool {
		entries, _, err = c.Client().KV().List(queueP, nil)
		return err == nil && len(entries) == 1
	})
	if !strings.HasSuffix(entries[0].Key, "/"+entries[0].Session) {
		t.Fatalf("queue entry %q is not named by its session %q", entries[0].Key, entries[0].Session)
	}
	locktest.ExpiredFromOutside(t, w, func(ctx context.Context) error { return c.ExpireLock(ctx, "orders/42") }, fakes.ErrNoHolder)
	_, idx, err := c.Client().KV().Get(writerK, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.WaitParked(writerK, idx.LastIndex, 1) // the reader waits out the lock-delay
	c.Advance(time.Second)
	got := locktest.Receive(t, reader)
	if got.Err != nil {
		t.Fatalf("the waiting reader's Lock: %v", got.Err)
	}
	locktest.UnlockOnce(t, got.Lease)
}

// TestRWMutexReadersOrOneWriter: goroutines of four clients take read and
// write leases: a writer is never inside with anyone.
func TestRWMutexReadersOrOneWriter(t *testing.T) {
	c := server(t)
	var readers, writers []locks.Locker
	for range 2 {
		readers = append(readers, newRW(t, c, Session{}).RLocker())
		writers = append(writers, newRW(t, c, Session{}).Locker())
	}
	// A hold of 20 ms: on the real agent each reader's admission takes
	// several Raft writes, longer than a hold of 1 ms, and readers then
	// never overlapped (CI's step 8).
	most := locktest.ReadersOrOneWriter(t, readers, writers, 2, 10, 20*time.Millisecond)
	t.Logf("at most %d readers at once", most)
	if most < 2 {
		t.Errorf("at most %d reader at once: readers never shared", most)
	}
}

func TestRWMutexMaxHold(t *testing.T) {
	c := server(t)
	locktest.MaxHold(t, c.Clock(), c.Advance, 3*time.Second,
		newRW(t, c, Session{}, locks.WithMaxHold(3*time.Second)).Locker(), newRW(t, c, Session{}).Locker())
}

func TestRWMutexReentrantByOwner(t *testing.T) {
	c := server(t)
	locktest.Reentrant(t, newRW(t, c, Session{}, locks.WithOwner("job-7")).Locker(),
		newRW(t, c, Session{}).Locker(), newRW(t, c, Session{}, locks.WithOwner("job-7")).Locker())
}

// counted is a Locker that counts its grants.
type counted struct {
	locks.Locker
	grants *atomic.Int64
}

func (c counted) Lock(ctx context.Context) (locks.Lease, error) {
	lease, err := c.Locker.Lock(ctx)
	if err == nil {
		c.grants.Add(1)
	}
	return lease, err
}

func (c counted) TryLock(ctx context.Context) (locks.Lease, error) {
	lease, err := c.Locker.TryLock(ctx)
	if err == nil {
		c.grants.Add(1)
	}
	return lease, err
}

// TestRWMutexWakesFew: 8 RWMutexes (as 8 processes, each with a client of
// its own), 4 taking reads and 4 writes, 2 goroutines each, 10 rounds
// each, holding 5 ms. Waiters block on their predecessor's queue entry, the
// head on the writer's key, a writer waiting for readers on the readers'
// prefix, and each holder's monitor on its own key: counted per grant, few
// blocking queries come back (every waiter on one prefix would make it
// grow with the number of waiters). At the end nothing is left.
func TestRWMutexWakesFew(t *testing.T) {
	c := server(t)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	count := &wakeCounter{next: tr}
	var grants atomic.Int64
	var readers, writers []locks.Locker
	var first *RWMutex
	for i := range 8 {
		client, err := api.NewClient(&api.Config{Address: c.Addr(), HttpClient: &http.Client{Transport: count}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewRWMutexWithSession(client, "cfg", Session{}, c.LockOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		first = m
		if i%2 == 0 {
			readers = append(readers, counted{m.RLocker(), &grants})
		} else {
			writers = append(writers, counted{m.Locker(), &grants})
		}
	}
	most := locktest.ReadersOrOneWriter(t, readers, writers, 2, 10, 5*time.Millisecond)
	perGrant := float64(count.woken.Load()) / float64(grants.Load())
	t.Logf("%d blocking queries answered for %d grants: %.2f per grant; at most %d readers at once",
		count.woken.Load(), grants.Load(), perGrant, most)
	if perGrant > 2.5 {
		t.Errorf("%.2f blocking queries answered per grant, want at most 2.5", perGrant)
	}
	nothingLeft(t, c, first)
}

// heldRenewal holds one session renewal of a client (once armed): it
// reports on held that the renewal is on its way, and sends it only after
// release is closed.
type heldRenewal struct {
	next          http.RoundTripper
	armed         atomic.Bool
	held, release chan struct{}
}

func (h *heldRenewal) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/session/renew/") && h.armed.CompareAndSwap(true, false) {
		close(h.held)
		<-h.release
	}
	return h.next.RoundTrip(r)
}

// TestRenewalAfterTheDeadlineGivesTheKeyUp: a reader's Renew, sent before
// its lease's local deadline, reaches the server after it. The server
// renews a session whose lease has ended, which nobody would release: its
// key would keep writers out for two TTLs and the lock-delay more. The
// renewal gives the key up instead and says the lease expired (not
// success: the suite's model would take the lease as extended), and a
// writer's TryLock right after succeeds. (The suite found it: -rapid.seed=6044428057898625664 of
// TestConsulRWMutexKeepsItsProperties, a late renewal by a reader that
// another reader shared the lock with, then a writer refused for 2.25 s
// after every lease had ended.)
func TestRenewalAfterTheDeadlineGivesTheKeyUp(t *testing.T) {
	c := server(t, consulfake.ForceMiniconsul())
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hold := &heldRenewal{next: tr, held: make(chan struct{}), release: make(chan struct{})}
	client, err := api.NewClient(&api.Config{Address: c.Addr(), HttpClient: &http.Client{Transport: hold}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewRWMutexWithSession(client, "cfg", Session{}, append(c.LockOptions(), locks.WithWatchdog(false))...)
	if err != nil {
		t.Fatal(err)
	}
	r := locktest.MustTryLock(t, m.RLocker())
	hold.armed.Store(true)
	renewed := make(chan error, 1)
	go func() { renewed <- r.Renew(context.Background()) }()
	<-hold.held
	c.Advance(locks.DefaultTTL) // past the lease's local deadline, not the server's 2×TTL
	locktest.Closed(t, "the reader's Done at its deadline", r.Done())
	close(hold.release)
	if err := <-renewed; !errors.Is(err, locks.ErrLeaseExpired) {
		t.Fatalf("the late renewal: %v, want ErrLeaseExpired (it renewed a session nobody holds, then gave it up)", err)
	}
	locktest.UnlockOnce(t, locktest.MustTryLock(t, newRW(t, c, Session{}).Locker()))
	nothingLeft(t, c, m)
}

// heldReaderKey holds a client's acquire of a reader's key: it reports
// on held that the reader holds the writer's key and is on its way, and
// sends the request only after release is closed.
type heldReaderKey struct {
	next          http.RoundTripper
	held, release chan struct{}
	once          atomic.Bool
}

func (h *heldReaderKey) RoundTrip(r *http.Request) (*http.Response, error) {
	if key, ok := acquiredKey(r); ok && strings.Contains(key, "/.reader/") &&
		h.once.CompareAndSwap(false, true) {
		close(h.held)
		<-h.release
	}
	return h.next.RoundTrip(r)
}

// TestRWMutexLostTurnstileEndsTheLock: a reader's Lock holds the writer's
// key on its way in, and another reader's TryLock is refused because of
// it; then the first reader's session is invalidated before its grant.
// Its Lock must end without a grant: only a grant of that attempt accounts
// for the refusal, and a later attempt's grant, with a later token, would
// leave the TryLock refused by nobody. (The suite found it:
// -rapid.seed=13685879566973124620 of TestConsulRWMutexKeepsItsProperties,
// exclusivity: the refused TryLock, a writer's grant, then the stalled
// reader's grant with a higher token.)
func TestRWMutexLostTurnstileEndsTheLock(t *testing.T) {
	c := server(t, consulfake.ForceMiniconsul())
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hold := &heldReaderKey{next: tr, held: make(chan struct{}), release: make(chan struct{})}
	client, err := api.NewClient(&api.Config{Address: c.Addr(), HttpClient: &http.Client{Transport: hold}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewRWMutexWithSession(client, "cfg", Session{}, c.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	reader := locktest.LockAsync(context.Background(), m.RLocker())
	<-hold.held
	refusedTry(t, newRW(t, c, Session{}).RLocker())
	sess, _ := writerKey(t, c, m)
	if err := c.ExpireSession(sess); err != nil {
		t.Fatal(err)
	}
	close(hold.release)
	r := locktest.Receive(t, reader)
	if r.Err == nil || errors.Is(r.Err, locks.ErrLocked) {
		t.Fatalf("Lock after losing the writer's key on its way in: %v, want an error other than ErrLocked", r.Err)
	}
	locktest.UnlockOnce(t, locktest.MustTryLock(t, newRW(t, c, Session{}).Locker()))
	nothingLeft(t, c, m)
}

// TestRWMutexWriterWaitBudget: a writer waiting for a reader gives up
// when its budget is spent on the manual clock, and gives the writer's key
// back: a reader's TryLock right after succeeds.
func TestRWMutexWriterWaitBudget(t *testing.T) {
	c := server(t, consulfake.ForceMiniconsul()) // WaitParked orders its steps: miniconsul only
	m := newRW(t, c, Session{})
	r := locktest.MustTryLock(t, m.RLocker())
	writer := locktest.LockAsync(context.Background(), newRW(t, c, Session{}, locks.WithWaitBudget(3*time.Second)).Locker())
	_, idx := readerKeys(t, c, m)
	c.WaitParked("", idx, 1)
	c.Advance(3 * time.Second)
	if res := locktest.Receive(t, writer); !errors.Is(res.Err, locks.ErrWaitBudget) {
		t.Fatalf("the writer's Lock: %v, want ErrWaitBudget", res.Err)
	}
	locktest.UnlockOnce(t, locktest.MustTryLock(t, newRW(t, c, Session{}).RLocker()))
	locktest.UnlockOnce(t, r)
	nothingLeft(t, c, m)
}
