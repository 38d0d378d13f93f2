// Package fakes provides test backends for lockproof: real protocol servers
// that start in a process, with or without a test, and in-memory stand-ins,
// all with time as an input.
//
// Every server starts two ways, as miniredis has Run beside RunT: a Start
// function (StartRedis, StartRedisCluster, StartEtcd, StartEtcdCluster,
// StartConsul, StartMySQL, StartZooKeeper) returns the server and an error,
// for a program or a test alike, and Close stops it. A real server is
// chosen by an option (RedisAt, RedisNodesAt, EtcdAt, ConsulAgent,
// MySQLAt, ZooKeeperAt), never by the environment. The testing.TB helpers
// (Redis, RedisCluster, Etcd, EtcdCluster, Consul, MySQL, ZooKeeper) are
// thin wrappers: they read the LOCKPROOF_* environment variables (and
// there only) into those options unless a Force option (ForceMiniredis,
// ForceEmbeddedEtcd, ForceMiniconsul, ForceEmbeddedMySQL, ForceMinizk)
// says to ignore them, call the Start function, fail the test on its
// error, and Close at t.Cleanup. A control that cannot go on (Advance
// without manual time, Stop on a real server) fails the test of a server
// from a helper, and panics on one from a Start function.
//
// ExpireLock (on each server but MemLock's) finds a lock's state where the
// lock keeps it: the key, row or node the lock package exports
// (redislock.Key, etcdlock.Key, consullock.Key, mysqllock.DefaultTable,
// zklock.NodePath), from the one definition both read. It fails with an
// error wrapping ErrNoHolder when nobody holds the lock.
//
// The index:
//
//   - Clock (clock.go): a manual locks.Clock. Time stands still until
//     Advance; WaitTimers lets a test wait until a goroutine has armed the
//     timer it is about to advance past.
//   - StartRedis and Redis (redis.go): a RedisServer, miniredis on a
//     loopback port or a real server (RedisAt, LOCKPROOF_REDIS_ADDR). It
//     gives clients, a unique key Prefix, the Clock to pass to locks
//     (LockOptions), Advance in manual mode (ManualTime), and Stop and
//     Restart to fail the server. miniredis publishes no keyspace
//     notifications: CONFIG SET notify-keyspace-events fails there with
//     ErrMiniredisNoKeyspaceNotifications (redis_config.go).
//   - StartRedisCluster and RedisCluster (rediscluster.go): RedisNodes, n
//     independent servers for Redlock with one Prefix and one Clock; real
//     servers come from RedisNodesAt (LOCKPROOF_REDIS_ADDRS).
//   - StartEtcd, StartEtcdCluster, Etcd and EtcdCluster (etcd.go,
//     etcdembed.go): etcd's embed server, one member or n on loopback, data
//     in a temporary directory, or a real cluster (EtcdAt,
//     LOCKPROOF_ETCD_ENDPOINTS). Controls: RevokeLease, ExpireLock, Stop and
//     Restart of one member; Logs.
//   - StartConsul and Consul (consul.go, consulagent.go): miniconsul
//     (package fakes/miniconsul, an in-memory Consul HTTP API with a manual
//     clock), or a real agent through sdk/testutil (ConsulAgent; for Consul,
//     the binary of LOCKPROOF_CONSUL_BIN or PATH). Controls: Advance,
//     ExpireSession, ExpireLock; ConsulSessionTTLMultiplier(1) makes
//     miniconsul end a session exactly at its TTL (default: at 2×TTL).
//   - StartZooKeeper and ZooKeeper (zookeeper.go): minizk (package
//     fakes/minizk, an in-process ZooKeeper on the real wire protocol, with
//     a manual clock), or a real server (ZooKeeperAt, LOCKPROOF_ZK_ADDR).
//     Connect hands out go-zookeeper clients; controls: Advance and
//     AdvanceTime (ZooKeeperManualTime), ExpireSession, ExpireLock, and minizk's own
//     (DropConnections, Pause, Restart). go-zookeeper's requests take no
//     context, so its clients are not gated.
//   - StartMySQL and MySQL (mysql.go): go-mysql-server with an in-memory
//     database on loopback, one statement at a time, or a private database
//     on a real server (MySQLAt, LOCKPROOF_MYSQL_DSN). Controls: ExpireLock,
//     and FollowClock (the in-process server's time read from a manual
//     clock, GET_LOCK's timeouts too). Named locks (GET_LOCK and kin) and
//     DO work as in MySQL; a GET_LOCK that waits does not block the others.
//   - Conns (conns.go): connections a client dialed through it, cut all
//     at once by Sever (a crashed process's), later dials refused with
//     ErrSevered. Every server's DialContext reaches it as its own clients
//     do, for a client a library builds from an address; NewClientThrough
//     (Redis, Consul, etcd), OpenDBThrough (MySQL) and ConnectThrough
//     (ZooKeeper) make clients whose connections go through a Conns.
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
// fails. Example_withoutATest is a program that uses StartRedis and
// StartEtcd. No test needs to sleep out a TTL: start the fake with manual time
// (ManualTime, ConsulManualTime), pass LockOptions to the lock, and
// Advance; where the server keeps its own time (etcd, MySQL), expire the
// lease with the fake's control instead.
package fakes
