// Package fakes provides test backends for lockproof: real protocol servers
// that start in a test, and in-memory stand-ins, all with time as an input.
//
// The index:
//
//   - Clock (clock.go): a manual locks.Clock. Time stands still until
//     Advance; WaitTimers lets a test wait until a goroutine has armed the
//     timer it is about to advance past.
//   - Redis (redis.go): a RedisServer for one test: miniredis on a loopback
//     port, or the real server named by LOCKPROOF_REDIS_ADDR. It gives
//     clients, a unique key Prefix, the Clock to pass to locks
//     (LockOptions), Advance in manual mode (ManualTime), and Stop and
//     Restart to fail the server.
//   - RedisCluster (rediscluster.go): RedisNodes, n independent servers for
//     Redlock with one Prefix and one Clock; real servers come from
//     LOCKPROOF_REDIS_ADDRS.
//   - Etcd and EtcdCluster (etcd.go, etcdembed.go): etcd's embed server,
//     one member or n on loopback, or the real cluster of
//     LOCKPROOF_ETCD_ENDPOINTS. Controls: RevokeLease, ExpireLock, Stop and
//     Restart of one member.
//   - Consul (consul.go, consulagent.go): miniconsul (package
//     fakes/miniconsul, an in-memory Consul HTTP API with a manual clock),
//     or the real agent through sdk/testutil when a consul binary is found
//     (LOCKPROOF_CONSUL_BIN or PATH). Controls: Advance, ExpireSession,
//     ExpireLock.
//   - ZooKeeper and StartZooKeeper (zookeeper.go): minizk (package
//     fakes/minizk, an in-process ZooKeeper on the real wire protocol, with
//     a manual clock), or the real server named by LOCKPROOF_ZK_ADDR.
//     Connect hands out go-zookeeper clients; controls: Advance and
//     AdvanceTime (ZooKeeperManualTime), ExpireSession, and minizk's own
//     (DropConnections, Pause, Restart). go-zookeeper's requests take no
//     context, so its clients are not gated.
//   - MySQL and StartMySQL (mysql.go): go-mysql-server with an in-memory
//     database on loopback, one statement at a time, or a private database
//     on the real server of LOCKPROOF_MYSQL_DSN. Control: ExpireLock.
//   - VerifyNoLeaks (leaks.go): goleak for TestMain, with the grace that
//     embedded etcd members' HTTP connections need.
//   - MemLock (memlock.go): an in-memory locks.Locker with fencing tokens,
//     TTLs on the injected clock, and fault injection (ExpireNow, FailNext),
//     for unit tests of code that uses a lock.
//   - Gating (gate*.go): every client the fakes hand out passes each request
//     through the locks.Gate of its context (locks.WithGate), under a name
//     that is the same from run to run: RedisGateHook ("redis node 1:
//     EVALSHA"; GateRedis for a client built elsewhere, with
//     RedisServer.GateLabel), GateConsulTransport ("consul PUT
//     /v1/kv?acquire", "consul GET /v1/kv (blocking)"), GatedMySQLConnector
//     ("mysql UPDATE", "mysql COMMIT"), EtcdGateDialOptions ("etcd KV/Txn"),
//     and MemLock itself ("memlock acquire"). Dials, watches and requests
//     sent with a context that carries no Gate go as before.
//
// Every helper that takes a testing.TB cleans up with t.Cleanup and fails
// the test with a message that says what to do. Nothing prints unless a test
// fails. No test needs to sleep out a TTL: start the fake with manual time
// (ManualTime, ConsulManualTime), pass LockOptions to the lock, and
// Advance; where the server keeps its own time (etcd, MySQL), expire the
// lease with the fake's control instead.
package fakes
