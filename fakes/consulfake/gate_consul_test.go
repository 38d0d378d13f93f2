package consulfake_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/consullock"
)

func consulLockNames(t *testing.T) []string {
	c := consulfake.New(t, consulfake.ForceMiniconsul(), consulfake.ManualTime(consulEpoch))
	l, err := consullock.New(c.NewClient(), "gated", c.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	names := faketest.GatedRun(t, l, false)
	faketest.UngatedRun(t, l)
	return names
}

func TestConsulGateSeesConsullock(t *testing.T) {
	first := consulLockNames(t)
	for _, n := range first {
		if strings.Contains(n, "-") { // the prefix and session ids have dashes
			t.Errorf("request %q names a variable part", n)
		}
	}
	if !slices.Contains(first, "lock: consul PUT /v1/txn") {
		t.Errorf("no acquisition among %q", first)
	}
	faketest.SameNames(t, first, consulLockNames(t))
}

func TestConsulGateNames(t *testing.T) {
	c := consulfake.New(t, consulfake.ForceMiniconsul(), consulfake.ManualTime(consulEpoch))
	cl := c.NewClient()
	g := &faketest.RecordingGate{}
	ctx := locks.WithGate(context.Background(), g)
	w := (&api.WriteOptions{}).WithContext(ctx)
	id, _, err := cl.Session().Create(nil, w)
	if err != nil {
		t.Fatal(err)
	}
	key := c.Prefix() + "some/key"
	if _, err := cl.KV().Put(&api.KVPair{Key: key, Value: []byte("v")}, w); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cl.Session().Renew(id, w); err != nil {
		t.Fatal(err)
	}
	// A blocking query whose index is already behind answers at once.
	p, _, err := cl.KV().Get(key, (&api.QueryOptions{WaitIndex: 1}).WithContext(ctx))
	if err != nil || p == nil || string(p.Value) != "v" {
		t.Fatalf("blocking get: %+v, %v", p, err)
	}
	if _, _, err := cl.KV().List(c.Prefix(), (&api.QueryOptions{}).WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Session().Destroy(id, w); err != nil {
		t.Fatal(err)
	}
	got := g.Names(t, "requests")
	want := []string{
		"consul PUT /v1/session/create",
		"consul PUT /v1/kv",
		"consul PUT /v1/session/renew",
		"consul GET /v1/kv (blocking)",
		"consul GET /v1/kv?recurse",
		"consul PUT /v1/session/destroy",
	}
	if !slices.Equal(got, want) {
		t.Errorf("the gate saw\n%q\nwant\n%q", got, want)
	}
}

func TestConsulGateHoldsTheRequest(t *testing.T) {
	c := consulfake.New(t, consulfake.ForceMiniconsul(), consulfake.ManualTime(consulEpoch))
	l, err := consullock.New(c.NewClient(), "held", c.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	faketest.HeldLock(t, l, func() error {
		sessions, _, err := c.Client().Session().List(nil)
		if err != nil {
			return err
		}
		if len(sessions) != 0 {
			return fmt.Errorf("the server has %d session(s)", len(sessions))
		}
		return nil
	})
}
