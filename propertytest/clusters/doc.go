// Package clusters runs the property suite on real replicated clusters of
// the cluster lab (fakes/lab): etcdlock on a 3-member etcd, zklock on a
// 3-server ZooKeeper, consullock on 3 Consul servers, redislock through
// Redis Sentinel, redlock on 5 independent Redis nodes and mysqllock on
// Galera, each member a process in a network namespace of its own, with
// Jepsen's nemeses on the leader: isolated from the other members
// (nftables), killed and restarted with its data, paused and resumed. The
// clients reach the members only through the lab's Dialer, and each knows
// every member's address (but a Consul client, which talks to one server:
// see Cluster.ConsulLock).
//
// A cluster takes seconds to start, so one serves every run of a test:
// Etcd, ZooKeeper and Consul start it for a test and close it at the test's
// cleanup, and its Factories (Cluster.EtcdLock, ZKLock, ConsulLock) start no
// server but give each run a key prefix of its own, so that no run meets
// the lock state an earlier run left. The faults are Ongoing: once every
// client crashed, the suite strikes the leader again before each
// deadlock-freedom probe. Each Backend declares its Recovery from the
// cluster's Timing (EtcdRecovery, ZKRecovery, ConsulRecovery): without it a correct lock
// draws a deadlock-freedom false alarm, as issue 35 saw on etcd.
//
// redislock runs through a Redis Sentinel group (RedisSentinel,
// RedisCluster.RedisLock) under a fault it does not claim: the primary cut
// off from its replicas, then failed over. A lock the primary acknowledged
// in between is lost with it, and so is the fencing counter, so the suite
// reports an expected exclusivity violation, whose history linearize finds
// Illegal.
//
// mysqllock runs on a 3-node MariaDB Galera cluster (Galera,
// GaleraCluster.MySQLLock), each client on one node, under a fault it does
// not claim: one node's clock skewed ahead (libfaketime). Its leases end
// at the server's NOW(6) of the node that wrote them, so a client of the
// skewed node takes over a lease another node granted while its holder
// still holds it: an expected exclusivity violation, whose history
// linearize finds Illegal.
//
// Redlock runs on 5 independent Redis nodes (RedisNodes,
// RedlockNodes.Redlock) whose majority is restarted one node after
// another. With each node's data (appendfsync always) it is a fault
// Redlock claims, and it keeps its lock; without (a node that never
// persisted comes back empty), a lock one client holds is free on a
// majority and a second client is granted it, the weakness Kleppmann
// pointed out: an expected exclusivity violation, whose history linearize
// finds Illegal.
//
// These three faults break a lock only around an acquisition, so each is
// marked AtAcquire (propertytest.Fault): besides the suite's Fault action,
// the run draws before each acquisition whether the fault strikes around
// it, and the expected violation shows in two to four runs in five, where
// it showed in one. Each strikes only where it can break the lock
// (propertytest.Fault's StrikeWhen): the failover around acquisitions of
// a free lock, the empty restart and the skewed clock around acquisitions
// of a held one.
//
// Real clusters keep their own time: a run is in real time, and replaying
// a seed replays the suite's steps and the fault schedule, not the
// servers' timers. The tests need the lab (LOCKPROOF_LAB=1, root, a
// TestMain calling lab.SandboxMain) and skip, saying why, without it:
//
//	LOCKPROOF_LAB=1 go test -count=1 -timeout 15m -v ./propertytest/clusters/
package clusters
