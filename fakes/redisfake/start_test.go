package redisfake_test

import (
	"strings"
	"testing"

	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/redisfake"
)

func TestStartRedisIgnoresTheEnvironment(t *testing.T) {
	t.Setenv(redisfake.EnvAddr, faketest.ClosedAddr)
	t.Setenv(redisfake.EnvAddrs, faketest.ClosedAddr)
	r, err := redisfake.Start()
	if err != nil || r.Real() {
		t.Fatalf("Start() with %s set: real %v, error %v; want miniredis", redisfake.EnvAddr, r != nil && r.Real(), err)
	}
	faketest.CloseOK(t, r)
	g, err := redisfake.StartCluster(2)
	if err != nil || g.Node(1).Real() {
		t.Fatalf("StartCluster(2) with %s set: %v; want miniredis", redisfake.EnvAddrs, err)
	}
	faketest.CloseOK(t, g)

	_, err = redisfake.Start(redisfake.At(faketest.ClosedAddr))
	faketest.WantStartError(t, "Start(At(closed))", err, "PING")
	r, err = redisfake.Start(redisfake.At(faketest.ClosedAddr), redisfake.ForceMiniredis())
	if err != nil || r.Real() {
		t.Fatalf("Start(RedisAt, ForceMiniredis): %v", err)
	}
	faketest.CloseOK(t, r)
}

func TestStartRedisClusterChecksItsNodes(t *testing.T) {
	_, err := redisfake.StartCluster(0)
	faketest.WantStartError(t, "StartCluster(0)", err, "at least one node")
	_, err = redisfake.StartCluster(2, redisfake.NodesAt(faketest.ClosedAddr))
	faketest.WantStartError(t, "StartCluster(2) on one server", err, "2 independent Redis servers needed, 1 given")
	_, err = redisfake.StartCluster(2, redisfake.NodesAt(faketest.ClosedAddr, faketest.ClosedAddr))
	faketest.WantStartError(t, "StartCluster(2) on one server twice", err, "twice")
	_, err = redisfake.StartCluster(1, redisfake.NodesAt(faketest.ClosedAddr))
	faketest.WantStartError(t, "StartCluster(1) on a closed port", err, "node 0")
}

func TestRedisOptionBeatsTheEnvironment(t *testing.T) {
	t.Setenv(redisfake.EnvAddr, "127.0.0.1:2")
	msg := faketest.FatalMessage(t, func(tb testing.TB) { redisfake.New(tb, redisfake.At(faketest.ClosedAddr)) })
	if !strings.Contains(msg, faketest.ClosedAddr) || strings.Contains(msg, redisfake.EnvAddr) {
		t.Errorf("Redis(At(%s)) with %s set failed with %q, want the option's server and no variable",
			faketest.ClosedAddr, redisfake.EnvAddr, msg)
	}
}

func TestStartedRedisPanicsWithoutATest(t *testing.T) {
	r, err := redisfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer faketest.CloseOK(t, r)
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "manual time") {
			t.Errorf("Advance in real time on Start's server: recovered %v, want a panic about manual time", p)
		}
	}()
	r.Advance(1)
}
