package redislock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// counted counts the commands a client sends, by name, but for the
// handshake of each new connection; the pub/sub connection's own commands
// do not pass through it.
type counted struct {
	mu sync.Mutex
	by map[string]int
}

func (c *counted) add(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]int{}
	}
	for _, cmd := range cmds {
		if name := strings.ToLower(cmd.Name()); name != "hello" && name != "client" { // a new connection's handshake
			c.by[name]++
		}
	}
}

func (c *counted) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counted) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.add(cmd); return next(ctx, cmd) }
}
func (c *counted) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.add(cmds...); return next(ctx, cmds) }
}

// total is the number of commands counted, and what they were.
func (c *counted) total() (int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.by {
		n += k
	}
	return n, fmt.Sprint(c.by)
}

// countedClient is a client of its own that counts its commands into c.
func countedClient(r *redisfake.Server, c *counted) *redis.Client {
	cl := r.NewClient()
	cl.AddHook(c)
	return cl
}

// queueUp starts one Lock per locker, in order, each once the one before
// sleeps on the clock (holding is the number of timers already pending:
// the holders' leases), so that they queue in that order.
func queueUp(t *testing.T, clock *fakes.Clock, holding int, lockers []locks.Locker) []<-chan locktest.Result {
	t.Helper()
	var got []<-chan locktest.Result
	for i, l := range lockers {
		got = append(got, locktest.LockAsync(context.Background(), l))
		if err := clock.WaitTimers(context.Background(), holding+i+1); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// perWaiter is the most commands a waiter served by hand-overs sends: its
// first attempt, its RPUSH, its Unlock; the first waiter also attempts
// once more after queueing. A waiter woken by every release instead
// attempts again at each, so the total grows with the square of the
// waiters.
const perWaiter = 3

// checkCommands fails t when the waiters sent more commands than waiters
// served by hand-overs alone do.
func checkCommands(t *testing.T, cmds *counted, waiters int) {
	t.Helper()
	if n, by := cmds.total(); n > perWaiter*waiters+1 {
		t.Fatalf("%d waiters sent %d commands (%s), want at most %d: releases woke waiters they did not serve",
			waiters, n, by, perWaiter*waiters+1)
	}
}

// TestSemaphoreReleaseWakesOneWaiter: ten waiters queued behind the one
// permit are served in arrival order, each by the release before it,
// without time moving, and no waiter sends a request it would not send
// alone: every release wakes exactly the waiter it serves.
func TestSemaphoreReleaseWakesOneWaiter(t *testing.T) {
	r, clock := manualRedis(t)
	holder := tryLock(t, newSemaphore(t, r, 1, locks.WithWatchdog(false)))
	const waiters = 10
	var cmds counted
	var lockers []locks.Locker
	for range waiters {
		s, err := NewSemaphore(countedClient(r, &cmds), "pool", 1, append(r.LockOptions(), locks.WithWatchdog(false))...)
		if err != nil {
			t.Fatal(err)
		}
		lockers = append(lockers, s)
	}
	got := queueUp(t, clock, 1, lockers)
	before := clock.Now()
	last := locktest.Token(t, holder)
	locktest.UnlockOnce(t, holder)
	for i, ch := range got {
		res := locktest.Receive(t, ch)
		if res.Err != nil {
			t.Fatalf("waiter %d: %v", i, res.Err)
		}
		for j := i + 1; j < waiters; j++ {
			if len(got[j]) > 0 {
				t.Fatalf("waiter %d returned while waiter %d holds the only permit", j, i)
			}
		}
		tok := locktest.Token(t, res.Lease)
		if tok <= last {
			t.Fatalf("waiter %d: token %v not above %v", i, tok, last)
		}
		last = tok
		locktest.UnlockOnce(t, res.Lease)
	}
	if !clock.Now().Equal(before) {
		t.Fatalf("time moved by %v", clock.Now().Sub(before))
	}
	checkCommands(t, &cmds, waiters)
	if n := r.Client().Exists(context.Background(), newSemaphore(t, r, 1).Key()+":queue").Val(); n != 0 {
		t.Fatal("the queue is left behind")
	}
}

// TestRWMutexReleaseWakesTheReadersThatCanEnter: behind a writer, readers
// R1 and R2, a writer W2 and a reader R3 queue in that order. The
// writer's release hands the lock to R1 and R2 alone; W2 gets it when
// both have gone, R3 after W2, each at the release, without time moving,
// and no waiter sends a request it would not send alone.
func TestRWMutexReleaseWakesTheReadersThatCanEnter(t *testing.T) {
	r, clock := manualRedis(t)
	writer := tryLock(t, newRW(t, r, locks.WithWatchdog(false)).Locker())
	var cmds counted
	view := func(write bool) locks.Locker {
		m, err := NewRWMutex(countedClient(r, &cmds), "cfg", append(r.LockOptions(), locks.WithWatchdog(false))...)
		if err != nil {
			t.Fatal(err)
		}
		if write {
			return m.Locker()
		}
		return m.RLocker()
	}
	got := queueUp(t, clock, 1, []locks.Locker{view(false), view(false), view(true), view(false)})
	keys := newRW(t, r).keys
	readers, waiting := keys[0], keys[2]
	modes := func() string { // the modes queued, in order
		var s string
		for _, m := range r.Client().LRange(context.Background(), waiting, 0, -1).Val() {
			s += m[len(m)-1:]
		}
		return s
	}
	before := clock.Now()
	locktest.UnlockOnce(t, writer)
	r1, r2 := locktest.Receive(t, got[0]), locktest.Receive(t, got[1])
	if r1.Err != nil || r2.Err != nil {
		t.Fatalf("readers' Lock: %v, %v", r1.Err, r2.Err)
	}
	if q, n := modes(), r.Client().ZCard(context.Background(), readers).Val(); q != "wr" || n != 2 {
		t.Fatalf("after the writer's release: queue %q, %d readers; want W2 and R3 queued, 2 readers", q, n)
	}
	locktest.UnlockOnce(t, r1.Lease)
	if q := modes(); q != "wr" {
		t.Fatalf("W2 served while R2 reads: queue %q", q)
	}
	locktest.UnlockOnce(t, r2.Lease)
	w2 := locktest.Receive(t, got[2])
	if w2.Err != nil {
		t.Fatalf("W2's Lock: %v", w2.Err)
	}
	if q := modes(); q != "r" {
		t.Fatalf("after R2's release: queue %q, want R3 alone", q)
	}
	locktest.UnlockOnce(t, w2.Lease)
	r3 := locktest.Receive(t, got[3])
	if r3.Err != nil {
		t.Fatalf("R3's Lock: %v", r3.Err)
	}
	if a, b := locktest.Token(t, w2.Lease), locktest.Token(t, r3.Lease); a <= locktest.Token(t, r2.Lease) || b <= a {
		t.Fatalf("tokens R2 %v, W2 %v, R3 %v do not grow", locktest.Token(t, r2.Lease), a, b)
	}
	locktest.UnlockOnce(t, r3.Lease)
	if !clock.Now().Equal(before) {
		t.Fatalf("time moved by %v", clock.Now().Sub(before))
	}
	checkCommands(t, &cmds, len(got))
}

// TestSemaphoreSkipsACrashedWaiter: a waiter whose process crashed (its
// place queued, nobody listening on its channel) is skipped by the
// release, which hands the permit to the live waiter behind it at once.
func TestSemaphoreSkipsACrashedWaiter(t *testing.T) {
	r, clock := manualRedis(t)
	held := tryLock(t, newSemaphore(t, r, 1, locks.WithWatchdog(false)))
	crashed := newSemaphore(t, r, 1)
	if res, err := crashed.acq.attempt(context.Background(), "crashed", true); err != nil || res.status != statusWait {
		t.Fatalf("the crashed waiter's attempt: %+v, %v", res, err)
	}
	got := queueUp(t, clock, 1, []locks.Locker{newSemaphore(t, r, 1, locks.WithWatchdog(false))})
	if n := r.Client().LLen(context.Background(), crashed.Key()+":queue").Val(); n != 2 {
		t.Fatalf("%d queued, want the crashed waiter and the live one", n)
	}
	before := clock.Now()
	locktest.UnlockOnce(t, held)
	res := locktest.Receive(t, got[0])
	if res.Err != nil {
		t.Fatalf("Lock: %v", res.Err)
	}
	if !clock.Now().Equal(before) {
		t.Fatalf("time moved by %v", clock.Now().Sub(before))
	}
	if err := r.Client().ZScore(context.Background(), crashed.Key(), "crashed").Err(); err != redis.Nil {
		t.Fatalf("the crashed waiter holds a permit (%v)", err)
	}
	locktest.UnlockOnce(t, res.Lease)
}
