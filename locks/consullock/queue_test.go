package consullock

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// wakeCounter counts, for every client it is the transport of, the blocking
// queries (those with an index) that came back with an answer: each is a
// waiter woken.
type wakeCounter struct {
	next  http.RoundTripper
	woken atomic.Int64
}

func (c *wakeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if index := r.URL.Query().Get("index"); err == nil && index != "" && index != "0" {
		c.woken.Add(1)
	}
	return resp, err
}

// queueEntries lists l's queue.
func queueEntries(t testing.TB, c *consulfake.Server, l *Locker) api.KVPairs {
	t.Helper()
	pairs, _, err := c.Client().KV().List(l.queuePrefix(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return pairs
}

// TestQueueWakesOnlyTheNext: 8 Lockers (as 8 processes, each with a client
// of its own) × 15 acquisitions through a Fence. A release wakes the next
// waiter in line, not all of them: with every waiter blocking on the lock
// key, each release woke the 7 waiters and the holder's monitor. At the
// end no queue entry and no session is left.
func TestQueueWakesOnlyTheNext(t *testing.T) {
	c := server(t)
	const workers, rounds = 8, 15
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	count := &wakeCounter{next: tr}
	var fence locks.Fence[int]
	var inside atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	var first *Locker
	for range workers {
		client, err := api.NewClient(&api.Config{Address: c.Addr(), HttpClient: &http.Client{Transport: count}})
		if err != nil {
			t.Fatal(err)
		}
		l := newLocker(t, c, client, "queue", Session{LockDelay: DefaultLockDelay(locks.DefaultTTL)})
		first = l
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- locktest.FencedIncrements(l, &fence, &inside, rounds, time.Minute)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, want := fence.Value(), workers*rounds; got != want {
		t.Fatalf("counter = %d, want %d: lost updates", got, want)
	}
	perAcq := float64(count.woken.Load()) / float64(workers*rounds)
	t.Logf("%d blocking queries answered for %d acquisitions: %.2f per acquisition",
		count.woken.Load(), workers*rounds, perAcq)
	// The holder's monitor (at most one answer, at the release) and the
	// next waiter (woken by its predecessor's entry, or, as the head, by
	// the lock key) make two.
	if perAcq > 2.5 {
		t.Errorf("%.2f blocking queries answered per acquisition, want at most 2.5: releases wake more than the next waiter", perAcq)
	}
	if left := queueEntries(t, c, first); len(left) != 0 {
		t.Errorf("%d queue entries left after every unlock, first %q", len(left), left[0].Key)
	}
	if c.Miniconsul() != nil {
		if left := c.Miniconsul().Sessions(); len(left) != 0 {
			t.Errorf("%d sessions left after every unlock", len(left))
		}
	}
}

// waitEntries waits until l's queue shows n entries and returns them, in
// queue order.
func waitEntries(t *testing.T, c *consulfake.Server, l *Locker, n int) api.KVPairs {
	t.Helper()
	var pairs api.KVPairs
	waitUntil(t, "the queue to have its entries", func() bool {
		pairs = queueEntries(t, c, l)
		return len(pairs) == n
	})
	sortByCreate(pairs)
	return pairs
}

func sortByCreate(pairs api.KVPairs) {
	for i := 1; i < len(pairs); i++ {
		for j := i; j > 0 && pairs[j].CreateIndex < pairs[j-1].CreateIndex; j-- {
			pairs[j], pairs[j-1] = pairs[j-1], pairs[j]
		}
	}
}

// TestQueueSkipsAnInvalidatedWaiter: B waits at the head of the queue, C
// behind it. B's session is invalidated (expired on the server, say): C
// must not wait behind B's released entry. It deletes it, moves to the head
// and gets the lock at the next release, before B, whose Lock call starts
// over with a new session at the back of the queue.
func TestQueueSkipsAnInvalidatedWaiter(t *testing.T) {
	c := server(t, consulfake.ForceMiniconsul())
	s := Session{LockDelay: time.Second}
	a := newLocker(t, c, nil, "res", s)
	b := newLocker(t, c, c.NewClient(), "res", s)
	cl := newLocker(t, c, c.NewClient(), "res", s)
	held := mustLock(t, a)
	if held == nil {
		t.FailNow()
	}
	gotB := locktest.LockAsync(t.Context(), b)
	waitEntries(t, c, a, 1)
	gotC := locktest.LockAsync(t.Context(), cl)
	entries := waitEntries(t, c, a, 2)
	c.WaitParked(entries[0].Key, entries[0].ModifyIndex, 1) // C, behind B

	dead := entries[0].Session // B's
	if err := c.ExpireSession(dead); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "C to delete B's released entry", func() bool {
		left := queueEntries(t, c, a)
		return len(left) == 1 && left[0].Key == entries[1].Key && left[0].Session != ""
	})
	_, idx := holder(t, c, a)
	// The holder's monitor, C (now the head) and B, which learns that its
	// session is gone only when it renews it or tries the key.
	c.WaitParked(a.Key(), idx, 3)
	if err := held.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	var rc locktest.Result
	select {
	case rc = <-gotC:
	case rb := <-gotB:
		t.Fatalf("B, requeued behind C, got the lock first (%v, %v)", rb.Lease, rb.Err)
	}
	if rc.Err != nil {
		t.Fatalf("C: %v", rc.Err)
	}
	leaseC := rc.Lease
	if err := leaseC.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	rb := locktest.Receive(t, gotB)
	if rb.Err != nil {
		t.Fatalf("B: %v", rb.Err)
	}
	leaseB := rb.Lease
	if token(t, leaseB) <= token(t, leaseC) {
		t.Fatal("token did not grow")
	}
	if err := leaseB.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := queueEntries(t, c, a); len(left) != 0 {
		t.Errorf("%d queue entries left", len(left))
	}
}

// TestQueueStalledEntryDoesNotBlock: a queue entry of a live session that
// never takes the lock (a foreign client, a bug) sits ahead of a waiter.
// When the lock is released the waiter, blocked on that entry, does not
// hear of it; once its wait times out (TTL/2, when it renews its session)
// it looks at the lock, finds it free and takes it.
func TestQueueStalledEntryDoesNotBlock(t *testing.T) {
	c := server(t, consulfake.ForceMiniconsul())
	s := Session{LockDelay: time.Second}
	h := newLocker(t, c, nil, "res", s)
	w := newLocker(t, c, c.NewClient(), "res", s)
	held := mustLock(t, h)
	if held == nil {
		t.FailNow()
	}
	// A session with no TTL and a queue entry, acquired like a waiter's.
	stray, _, err := c.Client().Session().Create(&api.SessionEntry{Name: "stray", Behavior: api.SessionBehaviorRelease}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Client().Session().Destroy(stray, nil) })
	if ok, _, err := c.Client().KV().Acquire(&api.KVPair{Key: h.queuePrefix() + stray, Session: stray}, nil); err != nil || !ok {
		t.Fatalf("stray entry: ok %v, err %v", ok, err)
	}
	got := locktest.LockAsync(t.Context(), w)
	entries := waitEntries(t, c, h, 2)
	c.WaitParked(entries[0].Key, entries[0].ModifyIndex, 1)
	if err := held.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		t.Fatalf("the waiter saw the release through a stalled entry (%v, %v)", r.Lease, r.Err)
	case <-time.After(50 * time.Millisecond):
	}
	c.Advance(locks.DefaultTTL / 2)
	select {
	case r := <-got:
		if r.Err != nil {
			t.Fatalf("the waiter: %v", r.Err)
		}
		if err := r.Lease.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	case <-time.After(locktest.LockTimeout):
		t.Fatal("the waiter stayed behind a stalled entry with the lock free")
	}
}
