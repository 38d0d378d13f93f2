package redisfake_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/locks/redlock"
)

// redisLockNames runs the gated operations of redislock on a fresh
// miniredis.
func redisLockNames(t *testing.T) []string {
	r := redisfake.New(t, redisfake.ManualTime(faketest.GateEpoch), redisfake.ForceMiniredis())
	l, err := redislock.New(r.NewClient(), "gated", r.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	names := faketest.GatedRun(t, l, false)
	faketest.UngatedRun(t, l)
	return names
}

func TestRedisGateSeesRedislock(t *testing.T) {
	first := redisLockNames(t)
	for _, n := range first {
		if !strings.Contains(n, ": redis node 0: ") {
			t.Errorf("request %q is not named after node 0", n)
		}
	}
	faketest.SameNames(t, first, redisLockNames(t))
}

func redlockNames(t *testing.T) []string {
	g := redisfake.NewCluster(t, 3, redisfake.ManualTime(faketest.GateEpoch), redisfake.ForceMiniredis())
	l, err := redlock.New(g.NewClients(), "gated", g.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	names := faketest.GatedRun(t, l, true)
	faketest.UngatedRun(t, l)
	return names
}

func TestRedisGateSeesRedlockOnEveryNode(t *testing.T) {
	first := redlockNames(t)
	for i := range 3 {
		node := fmt.Sprintf("redis node %d: ", i)
		for _, op := range []string{"lock: ", "renew: ", "unlock: "} {
			if !slices.ContainsFunc(first, func(n string) bool { return strings.HasPrefix(n, op+node) }) {
				t.Errorf("%sno request to %s in %q", op, node, first)
			}
		}
	}
	faketest.SameNames(t, first, redlockNames(t))
}

func TestRedisGateHoldsTheRequest(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(faketest.GateEpoch), redisfake.ForceMiniredis())
	l, err := redislock.New(r.NewClient(), "held", r.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	before := r.CommandCount()
	faketest.HeldLock(t, l, func() error {
		if n := r.CommandCount(); n != before {
			return fmt.Errorf("the server processed %d command(s)", n-before)
		}
		return nil
	})
}

func TestRedisGatePipelineAndNesting(t *testing.T) {
	r := redisfake.New(t, redisfake.ForceMiniredis())
	g := &faketest.RecordingGate{}
	ctx := locks.WithGate(context.Background(), g)
	// The client's first command dials and sends HELLO inside its window:
	// one request, not two.
	c := r.NewClient()
	if err := c.Set(ctx, r.Prefix()+"k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pipe := c.TxPipeline()
	pipe.Get(ctx, r.Prefix()+"k")
	pipe.ScriptLoad(ctx, "return 1")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	got := g.Names(t, "set and pipeline")
	want := []string{"redis node 0: SET", "redis node 0: MULTI, GET, SCRIPT LOAD, EXEC"}
	if !slices.Equal(got, want) {
		t.Errorf("the gate saw %q, want %q", got, want)
	}
}

// endedCtx stands for a locks.RequestContext's context just after its
// parent ended: its Err already reports the end, while its Done channel
// is closed later, by a goroutine of context.AfterFunc's.
type endedCtx struct {
	context.Context
	done chan struct{}
}

func (c endedCtx) Done() <-chan struct{} { return c.done }
func (c endedCtx) Err() error            { return context.Canceled }

// endingGate lets every request go at once; the context its requests carry
// has ended by then (endedCtx).
type endingGate struct{ asked *[]string }

func (g endingGate) Request(_ context.Context, what string) func() {
	*g.asked = append(*g.asked, what)
	return func() {}
}

// A command or pipeline whose context ended while the gate held it never
// reaches the server, though go-redis, which looks at Done, would have
// sent it: a crashed operation's request released by the property
// suite's scheduler was sent in one replay and not in another.
func TestRedisGateSendsNothingWhoseContextEnded(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(faketest.GateEpoch), redisfake.ForceMiniredis())
	c := r.NewClient()
	if err := c.Ping(context.Background()).Err(); err != nil { // a connection in the pool: nothing left to dial
		t.Fatal(err)
	}
	var asked []string
	ctx := locks.WithGate(endedCtx{Context: context.Background(), done: make(chan struct{})}, endingGate{&asked})
	key := r.Prefix() + "k"
	before := r.CommandCount()
	if err := c.Set(ctx, key, "v", 0).Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("SET: %v, want context.Canceled", err)
	}
	var get *redis.StringCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		return nil
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(get.Err(), context.Canceled) {
		t.Errorf("pipeline: %v, its GET: %v; want context.Canceled", err, get.Err())
	}
	if n := r.CommandCount() - before; n != 0 {
		t.Errorf("the server processed %d command(s) of requests whose context had ended", n)
	}
	want := []string{"redis node 0: SET", "redis node 0: MULTI, GET, EXEC"}
	if !slices.Equal(asked, want) {
		t.Errorf("the gate saw %q, want %q", asked, want)
	}
}
