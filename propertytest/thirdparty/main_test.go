package thirdparty_test

import (
	"testing"

	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// TestMain runs with the suite's short defaults (suitemain.Main). The
// go-redis v8 clients that amyangfei/redlock-go builds have no Close its
// user can reach: their pools' reapers stay behind. It also passes over
// Scalingo/go-etcd-lock's goroutines: each grant arms a time.AfterFunc of
// wall time that releases it ttl seconds later, which the library gives no
// way to stop, so the last runs' releases may still be retrying on a
// closed client when the tests end. And over the goroutines the Consul
// libraries keep after a crash by design: kvtools/consul's session
// renewer retries for ever once its connections are gone; consul/api's
// RenewPeriodic, started by api.Semaphore for its session, retries a
// crashed client's renewals for up to the session's TTL of wall time.
//
// The tests on the embedded etcd keep real time and mostly sleep: they run
// in a second process (suitemain.Beside), beside the others, which need the
// process to themselves. The tests over sockets (MySQL, ZooKeeper, and
// redlock-go's three Redis nodes) wait on them for most of their time:
// they run in a third. TestBeside collects both.
//
// The three etcd locks' runs are parallel subtests: all three run at once.
func TestMain(m *testing.M) {
	locktest.WaitingParallel(4)
	suitemain.Main(m, suitemain.IgnorePackages("github.com/go-redis/redis/v8", "github.com/Scalingo/go-etcd-lock",
		"github.com/kvtools/consul", "github.com/hashicorp/consul/api"), suitemain.Beside("Etcd"), suitemain.Beside("MySQL|RedlockGo|ZooKeeper|ZK"))
}

// TestBeside collects the tests TestMain runs in a second process.
func TestBeside(t *testing.T) { suitemain.Collect(t) }
