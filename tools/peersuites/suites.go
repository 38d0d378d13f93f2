package main

import "time"

// ensemble is why a go-zookeeper test does not apply to minizk.
const ensemble = "starts a 3-server ensemble; minizk is one standalone server"

// zkSuite is go-zookeeper's package: every test file, with
// server_java_test.go (which runs zkServer.sh) replaced.
var zkSuite = suite{
	name:    "zk",
	module:  "github.com/go-zookeeper/zk",
	pkg:     ".",
	drop:    []string{"server_java_test.go"},
	helper:  "zk_server_test.go",
	starts:  "StartTestCluster(",
	timeout: 150 * time.Second,
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
