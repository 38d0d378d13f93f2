package consulfake_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/locks"
)

var consulEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestConsulMiniconsul: the fake's controls on miniconsul: a client that
// works, manual time that drives session expiry, ExpireSession, and the
// parked-query waits.
func TestConsulMiniconsul(t *testing.T) {
	c := consulfake.New(t, consulfake.ForceMiniconsul(), consulfake.ManualTime(consulEpoch))
	if c.Real() || c.Miniconsul() == nil {
		t.Fatal("ForceMiniconsul gave a real agent")
	}
	t.Logf("miniconsul ready in %v", c.Startup())
	if _, ok := c.Clock().(*fakes.Clock); !ok {
		t.Fatalf("Clock() = %T, want the manual *fakes.Clock", c.Clock())
	}
	o, err := locks.Resolve("default/", c.LockOptions()...)
	if err != nil || o.Prefix != c.Prefix() || o.Clock != c.Clock() {
		t.Fatalf("LockOptions resolve to prefix %q clock %T (%v)", o.Prefix, o.Clock, err)
	}
	cl := c.NewClient()
	key := c.Prefix() + "k"
	id, _, err := cl.Session().Create(&api.SessionEntry{TTL: "10s", LockDelay: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := cl.KV().Acquire(&api.KVPair{Key: key, Session: id}, nil); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	p, _, _ := cl.KV().Get(key, nil)
	got := make(chan *api.KVPair, 1)
	go func() {
		q, _, _ := cl.KV().Get(key, &api.QueryOptions{WaitIndex: p.ModifyIndex, WaitTime: time.Hour})
		got <- q
	}()
	c.WaitParked(key, p.ModifyIndex, 1)
	c.Advance(20 * time.Second) // TTL × 2: the server invalidates the session
	if q := <-got; q == nil || q.Session != "" {
		t.Fatalf("after expiry: %+v", q)
	}
	id2, _, err := cl.Session().Create(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := cl.KV().Acquire(&api.KVPair{Key: key, Session: id2}, nil); ok {
		t.Fatal("acquired during the lock-delay")
	}
	c.Advance(time.Second)
	if ok, _, _ := cl.KV().Acquire(&api.KVPair{Key: key, Session: id2}, nil); !ok {
		t.Fatal("acquire after the lock-delay failed")
	}
	if err := c.ExpireSession(id2); err != nil {
		t.Fatal(err)
	}
	if p, _, _ := cl.KV().Get(key, nil); p.Session != "" {
		t.Fatal("ExpireSession left the lock held")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.Miniconsul().WaitBlocked(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

// TestConsulRealTimeAdvanceFails: without ManualTime, Advance is a
// test bug on miniconsul.
func TestConsulRealTimeAdvanceFails(t *testing.T) {
	c := consulfake.New(t, consulfake.ForceMiniconsul())
	if _, ok := c.Clock().(locks.SystemClock); !ok {
		t.Fatalf("Clock() = %T, want locks.SystemClock", c.Clock())
	}
	ft := &fatalTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		c2 := consulfake.New(ft, consulfake.ForceMiniconsul())
		c2.Advance(time.Second)
	}()
	if !ft.fatal {
		t.Fatal("Advance without manual time did not fail the test")
	}
}

// fatalTB records Fatalf instead of failing, and stops the caller by panic.
type fatalTB struct {
	testing.TB
	fatal bool
}

func (f *fatalTB) Fatalf(string, ...any) {
	f.fatal = true
	panic("fatal")
}

// TestConsulAgentStartup: a real agent starts, serves sessions, and the
// start-up times of both servers are reported.
func TestConsulAgentStartup(t *testing.T) {
	mini := consulfake.New(t, consulfake.ForceMiniconsul())
	c := consulfake.New(t, consulfake.ForceAgent())
	if !c.Real() {
		t.Fatal("ForceAgent gave miniconsul")
	}
	t.Logf("start-up: miniconsul %v, real agent %v (%.0f×)", mini.Startup(), c.Startup(),
		float64(c.Startup())/float64(max(mini.Startup(), time.Microsecond)))
	id, _, err := c.Client().Session().Create(&api.SessionEntry{TTL: "10s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := c.Client().KV().Acquire(&api.KVPair{Key: c.Prefix() + "k", Session: id}, nil); err != nil || !ok {
		t.Fatalf("acquire on the agent: %v %v", ok, err)
	}
}

// TestConsulSessionTTLMultiplier: by default miniconsul invalidates a
// session at twice its TTL; with SessionTTLMultiplier(1), exactly at
// its TTL. A real agent refuses the option, and a multiplier below 1 is
// refused.
func TestConsulSessionTTLMultiplier(t *testing.T) {
	for _, c := range []struct {
		name   string
		opts   []consulfake.Option
		expiry time.Duration
	}{
		{"default", nil, 20 * time.Second},
		{"one", []consulfake.Option{consulfake.SessionTTLMultiplier(1)}, 10 * time.Second},
		{"three", []consulfake.Option{consulfake.SessionTTLMultiplier(3)}, 30 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := consulfake.New(t, append(c.opts, consulfake.ForceMiniconsul(), consulfake.ManualTime(consulEpoch))...)
			cl := srv.Client()
			id, _, err := cl.Session().Create(&api.SessionEntry{TTL: "10s"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			alive := func() bool {
				t.Helper()
				e, _, err := cl.Session().Info(id, nil)
				if err != nil {
					t.Fatal(err)
				}
				return e != nil
			}
			srv.Advance(c.expiry - time.Nanosecond)
			if !alive() {
				t.Fatalf("the session ended before %v", c.expiry)
			}
			srv.Advance(time.Nanosecond)
			if alive() {
				t.Fatalf("the session outlived %v", c.expiry)
			}
		})
	}
	if _, err := consulfake.Start(consulfake.Agent("/nonexistent/consul"), consulfake.SessionTTLMultiplier(1)); err == nil ||
		!strings.Contains(err.Error(), "SessionTTLMultiplier") {
		t.Fatalf("a real agent with SessionTTLMultiplier: %v, want an error naming the option", err)
	}
	for _, n := range []int{0, -1} {
		if s, err := consulfake.Start(consulfake.SessionTTLMultiplier(n)); err == nil {
			_ = s.Close()
			t.Fatalf("SessionTTLMultiplier(%d) started", n)
		}
	}
}
