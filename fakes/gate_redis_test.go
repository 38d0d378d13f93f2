package fakes_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/locks/redlock"
)

var gateEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// redisLockNames runs the gated operations of redislock on a fresh
// miniredis.
func redisLockNames(t *testing.T) []string {
	r := fakes.Redis(t, fakes.ManualTime(gateEpoch), fakes.ForceMiniredis())
	l, err := redislock.New(r.NewClient(), "gated", r.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	names := gatedRun(t, l, false)
	ungatedRun(t, l)
	return names
}

func TestRedisGateSeesRedislock(t *testing.T) {
	first := redisLockNames(t)
	for _, n := range first {
		if !strings.Contains(n, ": redis node 0: ") {
			t.Errorf("request %q is not named after node 0", n)
		}
	}
	sameNames(t, first, redisLockNames(t))
}

func redlockNames(t *testing.T) []string {
	g := fakes.RedisCluster(t, 3, fakes.ManualTime(gateEpoch), fakes.ForceMiniredis())
	l, err := redlock.New(g.NewClients(), "gated", g.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	names := gatedRun(t, l, true)
	ungatedRun(t, l)
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
	sameNames(t, first, redlockNames(t))
}

func TestRedisGateHoldsTheRequest(t *testing.T) {
	r := fakes.Redis(t, fakes.ManualTime(gateEpoch), fakes.ForceMiniredis())
	l, err := redislock.New(r.NewClient(), "held", r.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	before := r.CommandCount()
	heldLock(t, l, func() error {
		if n := r.CommandCount(); n != before {
			return fmt.Errorf("the server processed %d command(s)", n-before)
		}
		return nil
	})
}

func TestRedisGatePipelineAndNesting(t *testing.T) {
	r := fakes.Redis(t, fakes.ForceMiniredis())
	g := &recordingGate{}
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
	got := g.names(t, "set and pipeline")
	want := []string{"redis node 0: SET", "redis node 0: MULTI, GET, SCRIPT LOAD, EXEC"}
	if !slices.Equal(got, want) {
		t.Errorf("the gate saw %q, want %q", got, want)
	}
}
