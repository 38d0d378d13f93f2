// Package lab starts real multi-node clusters as processes, one member
// per network namespace, with node controls, for tests that need a
// replicated backend rather than a fake: etcd and ZooKeeper ensembles of
// three (StartEtcd, StartZooKeeper), three Consul servers (StartConsul,
// the agent tools/consul builds), a MariaDB Galera cluster of three
// (StartGalera, with a skewed wall clock per node through libfaketime), a
// Redis primary with two replicas and three Sentinels (StartRedisSentinel,
// with go-redis's failover client), and independent Redis nodes for
// Redlock (StartRedisNodes).
//
// The whole lab lives inside a sandbox: a network namespace with only a
// loopback link and no route out, entered by re-running the test binary
// under `unshare --net --mount` (SandboxMain, from TestMain). New refuses
// to run anywhere else, and first runs CheckIsolation, which proves from
// inside without sending a packet that the sandbox has no way out. Each
// member is a namespace joined by a veth pair to a bridge in the sandbox,
// in one private /24 per lab (10.242.k.0/24); test code reaches members
// only through the lab's Dialer, which refuses any address outside that
// subnet and loopback before a socket exists. Its methods fit the clients'
// dial hooks: DialContext for go-redis and net/http, DialTCP for gRPC's
// WithContextDialer (etcd's clientv3), DialTimeout for go-zookeeper's
// zk.WithDialer.
//
// Node controls: a Member is killed (SIGKILL), restarted with or without
// its data, paused and resumed (SIGSTOP, SIGCONT), always by its process
// id. Partitions follow Jepsen's targets (Isolate one member, the leader
// included; Split a minority from the majority; Bridge two overlapping
// majorities; any Partition into groups) as nftables rules in the members'
// namespaces, which cut members from each other but not from the test
// process; Disconnect takes a member's link down. Heal undoes both. Close
// ends every process and deletes the namespaces, with their links and
// rules.
//
// Clock skew is not offered for etcd or ZooKeeper, because neither would
// honour it: libfaketime works by preloading a libc wrapper, and etcd is
// a Go program whose runtime reads the clock through the vDSO without
// libc (a Go program under faketime sees the true time); and both time
// their leases and sessions on a monotonic clock (etcd's lessor on Go's
// monotonic readings, ZooKeeper's session expiry on System.nanoTime), so
// an offset of the wall clock changes no expiry. Skew belongs to servers
// whose leases read the wall clock, such as MySQL's NOW().
//
// The tests run only with LOCKPROOF_LAB=1, as root, with ip, nft, unshare
// and nsenter, and skip a cluster whose server is missing (EtcdBinary,
// java and ZooKeeperJars):
//
//	LOCKPROOF_LAB=1 go test -count=1 ./fakes/lab/
package lab
