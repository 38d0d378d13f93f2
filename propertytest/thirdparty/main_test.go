package thirdparty_test

import (
	"testing"

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
func TestMain(m *testing.M) {
	suitemain.Main(m, suitemain.IgnorePackages("github.com/go-redis/redis/v8", "github.com/Scalingo/go-etcd-lock",
		"github.com/kvtools/consul", "github.com/hashicorp/consul/api"))
}
