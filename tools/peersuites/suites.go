package main

import (
	"regexp"
	"time"
)

// ensemble is why a go-zookeeper test does not apply to minizk, nor to
// the real server it is compared with.
const ensemble = "starts a 3-server ensemble; minizk (and the real server it is compared with) is one standalone server"

// zkSuite is go-zookeeper's package: every test file, with
// server_java_test.go (which runs zkServer.sh) replaced.
var zkSuite = suite{
	name:   "zk",
	module: "github.com/go-zookeeper/zk",
	pkg:    ".",
	drop:   []string{"server_java_test.go"},
	helper: "zk_server_test.go",
	starts: "StartTestCluster(",
	// The helper's waitForStart reads srvr's Mode line on a real server,
	// whose version line go-zookeeper's own cannot parse.
	patches: []patch{{file: "server_help_test.go",
		old: "func (tc *TestCluster) waitForStart(", new: "func (tc *TestCluster) upstreamWaitForStart("}},
	timeout: 80 * time.Second,
	skipped: map[string]string{
		"TestIntegration_BasicCluster":             ensemble,
		"TestIntegration_ClientClusterFailover":    ensemble,
		"TestIntegration_NoQuorum":                 ensemble,
		"TestIntegration_RecurringReAuthHang":      ensemble,
		"TestIntegration_DNSHostProviderReconnect": ensemble,
		"TestIntegration_IncrementalReconfig":      ensemble + " (and reconfig)",
		"TestIntegration_Reconfig":                 ensemble + " (and reconfig)",
	},
}

// consulSuite is consul/api's tests of KV, sessions, locks, semaphores
// and the status endpoints, without api_test.go, whose helpers (which
// start a consul agent) the helper of ours replaces.
var consulSuite = suite{
	name:    "consul",
	module:  "github.com/hashicorp/consul/api",
	pkg:     ".",
	keep:    regexp.MustCompile(`^(kv|lock|semaphore|session|status)_test\.go$`),
	helper:  "consul_server_test.go",
	starts:  "makeClient",
	timeout: 80 * time.Second,
	skippedFake: map[string]string{
		"TestAPI_SessionNodeChecks":    catalog + " node and its check",
		"TestAPI_SessionServiceChecks": catalog + " service and its check",
	},
}

// catalog is why a consul/api test does not apply to miniconsul (the
// part before the registration, a missing check refused, passes).
const catalog = "registers through /v1/catalog/register, which miniconsul does not model, a"
