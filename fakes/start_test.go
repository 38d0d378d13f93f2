package fakes_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/fakes"
)

// closeOK closes a fake and fails t if Close fails, the first time or the
// second (which must do nothing).
func closeOK(t *testing.T, c interface{ Close() error }) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// wantStartError fails t unless err is an error whose message holds want.
func wantStartError(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: error %v, want one that says %q", what, err, want)
	}
}

// TestStartRedisIgnoresTheEnvironment: a fake started without a test reads
// no environment variable; a real server comes from RedisAt only, and
// ForceMiniredis overrides RedisAt.
func TestStartRedisIgnoresTheEnvironment(t *testing.T) {
	t.Setenv(fakes.EnvRedisAddr, closedAddr)
	t.Setenv(fakes.EnvRedisAddrs, closedAddr)
	r, err := fakes.StartRedis()
	if err != nil || r.Real() {
		t.Fatalf("StartRedis() with %s set: real %v, error %v; want miniredis", fakes.EnvRedisAddr, r != nil && r.Real(), err)
	}
	closeOK(t, r)
	g, err := fakes.StartRedisCluster(2)
	if err != nil || g.Node(1).Real() {
		t.Fatalf("StartRedisCluster(2) with %s set: %v; want miniredis", fakes.EnvRedisAddrs, err)
	}
	closeOK(t, g)

	_, err = fakes.StartRedis(fakes.RedisAt(closedAddr))
	wantStartError(t, "StartRedis(RedisAt(closed))", err, "PING")
	r, err = fakes.StartRedis(fakes.RedisAt(closedAddr), fakes.ForceMiniredis())
	if err != nil || r.Real() {
		t.Fatalf("StartRedis(RedisAt, ForceMiniredis): %v", err)
	}
	closeOK(t, r)
}

func TestStartRedisClusterChecksItsNodes(t *testing.T) {
	_, err := fakes.StartRedisCluster(0)
	wantStartError(t, "StartRedisCluster(0)", err, "at least one node")
	_, err = fakes.StartRedisCluster(2, fakes.RedisNodesAt(closedAddr))
	wantStartError(t, "StartRedisCluster(2) on one server", err, "2 independent Redis servers needed, 1 given")
	_, err = fakes.StartRedisCluster(2, fakes.RedisNodesAt(closedAddr, closedAddr))
	wantStartError(t, "StartRedisCluster(2) on one server twice", err, "twice")
	_, err = fakes.StartRedisCluster(1, fakes.RedisNodesAt(closedAddr))
	wantStartError(t, "StartRedisCluster(1) on a closed port", err, "node 0")
}

// TestRedisOptionBeatsTheEnvironment: an explicit RedisAt given to Redis
// wins over EnvRedisAddr, which Redis reads as a RedisAt before its
// options.
func TestRedisOptionBeatsTheEnvironment(t *testing.T) {
	t.Setenv(fakes.EnvRedisAddr, "127.0.0.1:2")
	msg := fatalMessage(t, func(tb testing.TB) { fakes.Redis(tb, fakes.RedisAt(closedAddr)) })
	if !strings.Contains(msg, closedAddr) || strings.Contains(msg, fakes.EnvRedisAddr) {
		t.Errorf("Redis(RedisAt(%s)) with %s set failed with %q, want the option's server and no variable",
			closedAddr, fakes.EnvRedisAddr, msg)
	}
}

// TestStartedRedisPanicsWithoutATest: a control that would fail a test
// panics on a fake that has none.
func TestStartedRedisPanicsWithoutATest(t *testing.T) {
	r, err := fakes.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer closeOK(t, r)
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "manual time") {
			t.Errorf("Advance in real time on StartRedis's server: recovered %v, want a panic about manual time", p)
		}
	}()
	r.Advance(1)
}

func TestStartEtcdChecksItsEndpoints(t *testing.T) {
	t.Setenv(fakes.EnvEtcdEndpoints, "http://"+closedAddr)
	_, err := fakes.StartEtcdCluster(0)
	wantStartError(t, "StartEtcdCluster(0)", err, "at least one member")
	_, err = fakes.StartEtcdCluster(3, fakes.EtcdAt("http://"+closedAddr, "http://"+closedAddr))
	wantStartError(t, "StartEtcdCluster(3) on one endpoint twice", err, "3 members needed, 1 endpoints given")
	// StartEtcd(EtcdAt(an unreachable endpoint)) is TestEtcdUnreachableFailsClearly's
	// path (three seconds of wait): not repeated here.
	s, err := fakes.StartEtcd(fakes.EtcdAt("http://"+closedAddr), fakes.ForceEmbeddedEtcd())
	if err != nil || s.Real() {
		t.Fatalf("StartEtcd(EtcdAt, ForceEmbeddedEtcd): %v", err)
	}
	dir := s.Embedded(0).Config().Dir
	closeOK(t, s)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the member's data directory %s after Close: %v, want it removed", dir, err)
	}
}

func TestStartZooKeeperAt(t *testing.T) {
	_, err := fakes.StartZooKeeper(fakes.ZooKeeperAt(closedAddr))
	wantStartError(t, "StartZooKeeper(ZooKeeperAt(closed))", err, closedAddr)
	z, err := fakes.StartZooKeeper(fakes.ZooKeeperAt(closedAddr), fakes.ForceMinizk())
	if err != nil || z.Real() {
		t.Fatalf("StartZooKeeper(ZooKeeperAt, ForceMinizk): %v", err)
	}
	closeOK(t, z)
}

func TestStartMySQLAt(t *testing.T) {
	_, err := fakes.StartMySQL(fakes.MySQLAt("root@tcp(" + closedAddr + ")/named"))
	wantStartError(t, "StartMySQL(MySQLAt(a DSN with a database))", err, "leave it out")
	_, err = fakes.StartMySQL(fakes.MySQLAt("root@tcp(" + closedAddr + ")/"))
	wantStartError(t, "StartMySQL(MySQLAt(closed))", err, "create database")
	s, err := fakes.StartMySQL(fakes.MySQLAt("root@tcp("+closedAddr+")/"), fakes.ForceEmbeddedMySQL())
	if err != nil || s.Real() {
		t.Fatalf("StartMySQL(MySQLAt, ForceEmbeddedMySQL): %v", err)
	}
	if err := s.DB().PingContext(context.Background()); err != nil {
		t.Errorf("ping: %v", err)
	}
	closeOK(t, s)
}

func TestStartConsulChoosesItsServerByOption(t *testing.T) {
	t.Setenv(fakes.EnvConsulBin, "/nonexistent/consul")
	c, err := fakes.StartConsul()
	if err != nil || c.Real() {
		t.Fatalf("StartConsul() with %s set: %v; want miniconsul", fakes.EnvConsulBin, err)
	}
	closeOK(t, c)
	_, err = fakes.StartConsul(fakes.ForceConsulAgent())
	wantStartError(t, "StartConsul(ForceConsulAgent())", err, "ConsulAgent(bin)")
	_, err = fakes.StartConsul(fakes.ForceConsulAgent(), fakes.ForceMiniconsul())
	wantStartError(t, "StartConsul(both Force options)", err, "exclude each other")
	_, err = fakes.StartConsul(fakes.ConsulAgent("/nonexistent/consul"))
	wantStartError(t, "StartConsul(ConsulAgent(missing))", err, "no such file")
}
