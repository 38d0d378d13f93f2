package redlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
)

// epoch is where manual clocks start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// testTTL is the TTL of the manual-time tests.
const testTTL = time.Second

// manual starts n nodes in manual time and returns them with their clock.
func manual(t testing.TB, n int, opts ...redisfake.Option) (*redisfake.Nodes, *fakes.Clock) {
	t.Helper()
	g := redisfake.NewCluster(t, n, append([]redisfake.Option{redisfake.ManualTime(epoch)}, opts...)...)
	return g, g.Clock().(*fakes.Clock)
}

// newLocker returns a Locker on g's nodes through clients (g.Clients() when
// nil), with g's prefix and clock, the test TTL and request timeout, then
// opts.
func newLocker(t testing.TB, g *redisfake.Nodes, clients []redis.UniversalClient, opts ...locks.Option) *Locker {
	t.Helper()
	if clients == nil {
		clients = g.Clients()
	}
	// Requests get 3/10 of the TTL of wall time, not the default tenth:
	// 100 ms ran out for every node of a fan-out on a loaded CI machine.
	all := append(append(g.LockOptions(), locks.WithTTL(testTTL), locks.WithRequestTimeout(testTTL*3/10)), opts...)
	l, err := New(clients, "job", all...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// testCtx bounds a test's calls on the wall clock: a hang fails the test
// instead of stalling the package.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustTryLock(t testing.TB, l *Locker) locks.Lease {
	t.Helper()
	lease, err := l.TryLock(testCtx(t))
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	return lease
}

// owners returns what every running node stores under key ("" when absent),
// read through the nodes' own clients; stopped nodes are skipped.
func owners(t testing.TB, g *redisfake.Nodes, key string, skip ...int) []string {
	t.Helper()
	out := make([]string, len(g.Nodes()))
	for i, n := range g.Nodes() {
		if contains(skip, i) {
			continue
		}
		v, err := n.Client().Get(testCtx(t), key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("GET %s on node %d: %v", key, i, err)
		}
		out[i] = v
	}
	return out
}

// requireNoKey fails unless EXISTS key is 0 on every node not in skip.
func requireNoKey(t testing.TB, g *redisfake.Nodes, key string, skip ...int) {
	t.Helper()
	for i, n := range g.Nodes() {
		if contains(skip, i) {
			continue
		}
		got, err := n.Client().Exists(testCtx(t), key).Result()
		if err != nil {
			t.Fatalf("EXISTS %s on node %d: %v", key, i, err)
		}
		if got != 0 {
			t.Errorf("node %d still holds %s", i, key)
		}
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// waitTimers waits until n timers are armed on c: the goroutine under test
// has gone to sleep on its own timer.
func waitTimers(t testing.TB, c *fakes.Clock, n int) {
	t.Helper()
	if err := c.WaitTimers(testCtx(t), n); err != nil {
		t.Fatalf("waiting for %d timers (have %d): %v", n, c.Pending(), err)
	}
}

// errLostReply is what lostReply reports instead of the server's answer.
var errLostReply = errors.New("test: reply lost")

// lostReply is a go-redis hook that lets every transaction run on the
// server, then reports it failed, as when the reply is lost on the way back.
type lostReply struct{ applied *atomic.Int32 }

func (lostReply) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (lostReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h lostReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := next(ctx, cmds); err != nil && !errors.Is(err, redis.Nil) {
			return err // it did not even run
		}
		h.applied.Add(1)
		for _, c := range cmds {
			c.SetErr(errLostReply)
		}
		return errLostReply
	}
}

// slowNode is a go-redis hook that moves the clock by d before each
// transaction, as a node answering late.
type slowNode struct {
	clock *fakes.Clock
	d     time.Duration
}

func (slowNode) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (slowNode) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h slowNode) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.clock.Advance(h.d)
		return next(ctx, cmds)
	}
}

// events records what an Observer is told.
type events struct {
	mu  sync.Mutex
	all []locks.Event
}

func (e *events) Observe(_ context.Context, ev locks.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) get() []locks.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]locks.Event(nil), e.all...)
}
