// Package fakes is the light core of lockproof's test backends: a manual
// clock, an in-memory lock, severable connections, a goroutine-leak check,
// and the interfaces every backend's fake satisfies. It imports no backend
// client; each backend's fake lives in a package of its own, so that a test
// of a Redis lock compiles miniredis and go-redis, not etcd:
//
//   - redisfake: miniredis or a real Redis; Nodes for Redlock.
//   - etcdfake: embedded etcd (one member or a cluster) or a real cluster.
//   - consulfake: miniconsul (fakes/miniconsul) or a real agent.
//   - mysqlfake: go-mysql-server in the process or a real MySQL.
//   - zkfake: minizk (fakes/minizk) or a real ZooKeeper.
//
// Each starts two ways, as miniredis has Run beside RunT: Start returns the
// server and an error, for a program or a test alike, and Close stops it;
// New(t) is a thin wrapper that reads the backend's LOCKPROOF_* environment
// variable into the option that picks a real server (At; NodesAt for Redis
// nodes) unless a Force option says not to, fails t on Start's error and
// closes the server at t's cleanup. A control that cannot go on (Advance
// without manual time, Stop on a real server) fails the test of a server
// from New, and panics on one from Start. Every backend says manual time
// with one option, ManualTime(start), but etcd, whose leases run on the
// server's own clock.
//
// The core:
//
//   - Server: Addr, Close, LockOptions, ExpireLock, Real; every backend's
//     server satisfies it (a compile-time assertion in each package).
//     ManualTimer (Clock, Advance) is a server in manual time;
//     SessionExpirer (ExpireSession(id) error) one whose locks live in
//     sessions (Consul's, ZooKeeper's). ExpireLock finds a lock's state where
//     the lock keeps it, from the one definition both read
//     (internal/layout), and fails with an error wrapping ErrNoHolder when
//     nobody holds the lock.
//   - Clock (clock.go): a manual locks.Clock. Time stands still until
//     Advance; WaitTimers lets a test wait until a goroutine has armed the
//     timer it is about to advance past.
//   - Conns (conns.go): connections a client dialed through it, cut all at
//     once by Sever (a crashed process's), later dials refused with
//     ErrSevered. Every server's DialContext connects as its own clients
//     do, in memory on the in-process servers (etcd's excepted: see
//     etcdfake) and over TCP on real ones; NewClientThrough, OpenDBThrough
//     and ConnectThrough make clients whose connections go through a Conns.
//   - VerifyNoLeaks (leaks.go): goleak for TestMain, with the grace that
//     embedded etcd members' HTTP connections need.
//   - MemLock (memlock.go): an in-memory locks.Locker with fencing tokens,
//     TTLs on the injected clock, and fault injection (ExpireNow,
//     FailNext), for unit tests of code that uses a lock. Its requests pass
//     through the locks.Gate of their context ("memlock acquire"), as every
//     backend client's do (see each backend's Gate hooks).
//
// Nothing prints unless a test fails. No test needs to sleep out a TTL:
// start the fake with ManualTime, pass LockOptions to the lock, and
// Advance; where the server keeps its own time (etcd), expire the lease
// with ExpireLock instead.
//
// # Migration from the single package
//
// Before the split every name lived in package fakes. The core kept
// Clock, NewClock, Conns, NewConns, DialFunc, ErrSevered, ErrNoHolder,
// MemLock, NewMemLock, VerifyNoLeaks, ZKFlushWedge, IgnoreConsulPorts and
// EtcdPeerGrace. The rest moved (old fakes name, then new one):
//
// redisfake: Redis New, StartRedis Start, RedisServer Server, RedisCluster
// NewCluster, StartRedisCluster StartCluster, RedisNodes Nodes, RedisOption
// Option, ManualTime ManualTime, ForceMiniredis ForceMiniredis, RedisAt At,
// RedisNodesAt NodesAt, RedisGateHook GateHook, GateRedis Gate,
// ErrMiniredisNoKeyspaceNotifications (same name), EnvRedisAddr EnvAddr,
// EnvRedisAddrs EnvAddrs.
//
// etcdfake: Etcd New, StartEtcd Start, EtcdServer Server, EtcdCluster
// NewCluster, StartEtcdCluster StartCluster, EtcdOption Option, EtcdAt At,
// ForceEmbeddedEtcd ForceEmbedded, EtcdGateDialOptions GateDialOptions,
// EtcdGateUnaryInterceptor GateUnaryInterceptor, EtcdGateStreamInterceptor
// GateStreamInterceptor, EnvEtcdEndpoints EnvEndpoints.
//
// consulfake: Consul New, StartConsul Start, ConsulServer Server,
// ConsulOption Option, ConsulManualTime ManualTime, ConsulAgent Agent,
// ConsulSessionTTLMin SessionTTLMin, ConsulSessionTTLMultiplier
// SessionTTLMultiplier, ForceConsulAgent ForceAgent, ForceMiniconsul
// ForceMiniconsul, GateConsulTransport GateTransport, ConsulBinary Binary,
// EnvConsulBin EnvBin.
//
// mysqlfake: MySQL New, StartMySQL Start, MySQLServer Server, MySQLOption
// Option, MySQLAt At, ForceEmbeddedMySQL ForceEmbedded, GatedMySQLConnector
// GatedConnector, DefaultLockTable DefaultLockTable, ErrMySQLClockTaken
// ErrClockTaken, EnvMySQLDSN EnvDSN.
//
// zkfake: ZooKeeper New, StartZooKeeper Start, ZooKeeperServer Server,
// ZooKeeperOption Option, ZooKeeperManualTime ManualTime, ZooKeeperTickTime
// TickTime, ZooKeeperAt At, ForceMinizk ForceMinizk, ErrZooKeeperNotManual
// ErrNotManual, EnvZKAddr EnvAddr.
//
// Changed signatures: ConsulServer.ExpireSession(id) failed the test and
// now returns an error (wrapping ErrNoSession for an unknown session), as
// zkfake's ExpireSession(int64) error does. New: mysqlfake.ManualTime and
// mysqlfake.Server's Addr, Clock, LockOptions and Advance;
// redisfake.Nodes' Addr and Real; etcdfake.Server's Addr. minizk's and
// miniconsul's WithClock take any clock whose AfterFunc timer can be
// stopped (a locks.Clock, a fakes.Clock) and their Server.Clock returns
// their own Clock type, so that neither imports package locks.
package fakes
