package main

import (
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
	"github.com/lockproof/lockproof/propertytest/mutants"
)

// cell is one lock under one fault scenario: a row of check's table.
type cell struct {
	lock   string // "redislock", or "mutant/<name>"
	faults string // the scenario: "crash", "network", "failover", …
	about  string // what the scenario injects, for the report
	// factory builds the lock on its backend; opts carry the lock's claims
	// (a violation under an unclaimed fault is expected, not a failure).
	factory propertytest.Factory
	opts    propertytest.Options
	// breaks is, for a mutant, the property it is built to break.
	breaks propertytest.Property
	// group is, for a cell check runs only when asked by name, the name
	// that selects its whole group: groupMutants, groupSemaphores.
	group string
	// real: the cell runs on a real server, not on an embedded backend.
	real bool
	// fewerSteps divides -steps for this cell: its runs take real time.
	fewerSteps int
	// weight is the cell's part of the budget against the other cells'
	// (0 counts as 1): an embedded backend in real time takes seconds a
	// run where the others take tens of milliseconds.
	weight int
	// kind is, for a cell on a lab cluster (check -clusters), its cluster,
	// and onCluster makes its factory once the cluster runs.
	kind      *clusterKind
	onCluster func(running io.Closer) propertytest.Factory
	// shows is, for a cell whose stated outcome is a violation under a
	// fault the lock does not claim, that property: the cell runs one run
	// at a time and stops at the first run that shows it (see runCell).
	// "": the stated outcome is that no claimed property breaks.
	shows propertytest.Property
}

// statedPass is the outcome stated for a cell whose lock claims every
// fault the cell injects.
const statedPass = "no claimed property violated"

// statedOutcome is what the plan says of c before the run.
func (c *cell) statedOutcome() string {
	if c.shows == "" {
		return statedPass
	}
	return string(c.shows) + " expected"
}

// realTimeWeight is the budget weight of a cell on an embedded backend in
// real time (etcd): at the default budget, about 35 s of 90, 6 or 7 runs,
// where the other cells make dozens in their 7 s.
const realTimeWeight = 5

// weightOf is c's budget weight.
func (c *cell) weightOf() int { return max(c.weight, 1) }

// stepsOf is the average number of actions per run in this cell when
// -steps is steps.
func (c *cell) stepsOf(steps int) int {
	if c.fewerSteps > 1 {
		return max(steps/c.fewerSteps, 5)
	}
	return steps
}

func (c *cell) name() string { return c.lock + "/" + c.faults }

// id is the cell's 16-bit number, the top bits of every seed check uses
// in it, so that a seed alone names the cell it replays in. It is a hash
// of the name: stable as cells come and go.
func (c *cell) id() uint16 {
	h := fnv.New32a()
	h.Write([]byte(c.name()))
	if c.real {
		// Not the embedded cell's id: replaying a real server's seed
		// without the server must not quietly run on the embedded one.
		h.Write([]byte("@real"))
	}
	s := h.Sum32()
	return uint16(s>>16) ^ uint16(s)
}

// claimsOf lists a cell's claimed fault kinds for display.
func claimsOf(o propertytest.Options) string {
	if len(o.Claims) == 0 {
		return "crash, pause"
	}
	var s []string
	for _, k := range o.Claims {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// Lock names of the built-in matrix.
const (
	lockRedis   = "redislock"
	lockRedlock = "redlock"
	lockEtcd    = "etcdlock"
	lockConsul  = "consullock"
	lockMySQL   = "mysqllock"
	lockZK      = "zklock"
	mutantLock  = "mutant/"
)

// Groups of cells check runs only when asked by name, each cell by its own
// lock name or all of the group by the group's.
const (
	groupMutants    = "mutants"
	groupSemaphores = "semaphores"
	groupRWLocks    = "rwlocks"
	groupReentrant  = "reentrant"
)

// semaphorePermits is the number of permits of the semaphore cells.
const semaphorePermits = 2

// endpoints are real servers to run the matrix against instead of the
// embedded backends.
type endpoints struct {
	redis      string   // one Redis server, for redislock
	redisNodes []string // independent Redis servers, for redlock
	etcd       []string // an etcd cluster's client URLs, for etcdlock
	consul     string   // Consul agents' HTTP addresses (comma-separated)
	mysql      string   // MySQL DSNs without a database (comma-separated)
	zk         string   // ZooKeeper servers' host:port (comma-separated)
	deploy     deployment
}

// flags registers a flag per kind of endpoint on fs; usage is a format
// with the lock (%[1]s), the server (%[2]s) and the embedded backend it
// replaces (%[3]s).
func (ep *endpoints) flags(fs *flag.FlagSet, usage string) {
	fs.StringVar(&ep.redis, "redis", "", fmt.Sprintf(usage, lockRedis, "this real Redis (host:port)", "miniredis"))
	fs.Func("redis-nodes", fmt.Sprintf(usage, lockRedlock, "these independent real Redis servers (host:port,host:port,…; at least 3)", "miniredis nodes"),
		func(s string) error {
			ep.redisNodes = splitList(s)
			if len(ep.redisNodes) < 3 {
				return fmt.Errorf("redlock needs at least 3 servers, got %d", len(ep.redisNodes))
			}
			return nil
		})
	fs.Func("etcd", fmt.Sprintf(usage, lockEtcd, "this etcd cluster (client URLs, comma-separated)", "an embedded etcd"),
		func(s string) error {
			if ep.etcd = splitList(s); len(ep.etcd) == 0 {
				return errors.New("no endpoint")
			}
			return nil
		})
	fs.StringVar(&ep.consul, "consul", "", fmt.Sprintf(usage, lockConsul,
		"this Consul agent (host:port of its HTTP API; its session_ttl_min must be 1s or less), or these agents of one datacenter (comma-separated; client i on agent i mod n)", "miniconsul"))
	fs.StringVar(&ep.mysql, "mysql", "", fmt.Sprintf(usage, lockMySQL,
		"this MySQL or MariaDB (a DSN without a database, such as root@tcp(127.0.0.1:3306)/; the run creates and drops its own), or these nodes of one replicated deployment such as Galera (DSNs separated by commas, sharing the first's parameters; client i on node i mod n)", "the in-process go-mysql-server"))
	fs.Func("zk", fmt.Sprintf(usage, lockZK,
		"this ZooKeeper server (host:port; it must grant 1s sessions, as one with tickTime 200ms does), or this ensemble (host:port,host:port,…; client i starts at server i mod n)", "minizk"),
		func(s string) error {
			var addrs []string
			err := hostPortList(&addrs, s)
			ep.zk = strings.Join(addrs, ",")
			return err
		})
	ep.deployFlags(fs, usage)
}

// realTTL is the lease TTL on real servers, where runs take real time.
const realTTL = 200 * time.Millisecond

// builtinCells is the matrix of the built-in locks on embedded backends, or
// on the real servers of ep where given.
func builtinCells(ep endpoints) []cell {
	crashPause := []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultPause}
	var cells []cell
	if ep.redis != "" {
		cells = append(cells, cell{lock: lockRedis, faults: "crash", about: "client crashes and pauses, real Redis at " + ep.redis + ", real time",
			real: true, factory: backends.RedisLockOn(ep.redis), opts: propertytest.Options{TTL: realTTL}})
	} else {
		cells = append(cells,
			cell{lock: lockRedis, faults: "crash", about: "client crashes and pauses",
				factory: backends.RedisLock()},
			cell{lock: lockRedis, faults: "network", about: "a client partitioned, another's replies dropped",
				factory: backends.RedisLockWithNetworkFaults(),
				opts: propertytest.Options{TTL: 100 * time.Millisecond, OpTimeout: 30 * time.Millisecond, Settle: 5 * time.Millisecond,
					Claims: append(slices.Clone(crashPause), propertytest.FaultPartition)}},
			cell{lock: lockRedis, faults: "failover", about: "the primary replaced by a replica 1s behind (not claimed)",
				factory: backends.RedisLockWithFailover(time.Second)},
		)
	}
	if len(ep.redisNodes) > 0 {
		cells = append(cells, cell{lock: lockRedlock, faults: "crash",
			about: fmt.Sprintf("client crashes; pauses (not claimed: no fencing); %d real Redis servers, real time", len(ep.redisNodes)),
			real:  true, factory: backends.RedlockOn(ep.redisNodes),
			opts: propertytest.Options{TTL: realTTL, Claims: []propertytest.FaultKind{propertytest.FaultCrash}}})
	} else {
		cells = append(cells,
			cell{lock: lockRedlock, faults: "node-down", about: "a minority of 5 nodes stopped and restarted; pauses (not claimed: no fencing)",
				factory: backends.Redlock(5),
				opts:    propertytest.Options{Claims: []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultNodeDown}}},
		)
	}
	// The options are the ones each factory's documentation gives, and why.
	if len(ep.etcd) > 0 {
		cells = append(cells, cell{lock: lockEtcd, faults: "crash", about: "client crashes and pauses, real etcd at " + strings.Join(ep.etcd, ","),
			real: true, factory: backends.EtcdLockOn(ep.etcd), opts: backends.EtcdLockOnOptions(), fewerSteps: 3})
	} else {
		cells = append(cells, cell{lock: lockEtcd, faults: "crash",
			about:   "client crashes and pauses; the holder's lease revoked (not claimed); embedded etcd, real time",
			factory: backends.EtcdLock(), opts: backends.EtcdLockOptions(), fewerSteps: 3, weight: realTimeWeight})
	}
	if ep.consul != "" {
		cells = append(cells, cell{lock: lockConsul, faults: "crash", about: "client crashes and pauses, real Consul at " + ep.consul + ", real time",
			real: true, factory: ep.consulFactory(), opts: backends.ConsulLockOnOptions()})
	} else {
		cells = append(cells, cell{lock: lockConsul, faults: "crash",
			about:   "client crashes and pauses; the holder's session invalidated (not claimed)",
			factory: backends.ConsulLock(), opts: backends.ConsulLockOptions()})
	}
	if ep.mysql != "" {
		cells = append(cells, cell{lock: lockMySQL, faults: "crash", about: "client crashes and pauses, real MySQL, real time",
			real: true, factory: ep.mysqlFactory(), opts: propertytest.Options{TTL: realTTL}})
	} else {
		cells = append(cells, cell{lock: lockMySQL, faults: "crash",
			about:   "client crashes and pauses; the server's clock jumps past the holder's expiry (not claimed)",
			factory: backends.MySQLLock()})
	}
	if ep.zk != "" {
		cells = append(cells, cell{lock: lockZK, faults: "crash", about: "client crashes and pauses, real ZooKeeper at " + ep.zk + ", real time",
			real: true, factory: ep.zkFactory(), opts: backends.ZKLockOnOptions(), fewerSteps: 3})
	} else {
		cells = append(cells,
			cell{lock: lockZK, faults: "crash",
				about:   "client crashes and pauses; the holder's session expired while it trusts its lease (not claimed)",
				factory: backends.ZKLock()},
			cell{lock: lockZK, faults: "network",
				about:   "a client partitioned, another's replies dropped; the holder's session expired while it trusts its lease (not claimed)",
				factory: backends.ZKLockWithNetworkFaults(), opts: backends.ZKLockNetworkOptions()},
		)
	}
	return ep.deployCells(cells)
}

// mutantCells are the deliberately broken locks, each under the faults its
// mutant is run with.
func mutantCells() []cell {
	var cells []cell
	for _, m := range mutants.All() {
		cells = append(cells, cell{lock: mutantLock + m.Name, faults: "mutant", about: m.Bug,
			factory: m.Factory, opts: m.Options, breaks: m.Breaks, group: groupMutants})
	}
	return cells
}

// semaphoreCells are the semaphores of semaphorePermits permits on the
// embedded backends (whatever real servers check was given), with the
// options their factories' documentation gives. They run only when asked
// by name: the default matrix keeps its budget.
func semaphoreCells() []cell {
	permits := func(o propertytest.Options) propertytest.Options {
		o.Permits, o.Clients = semaphorePermits, 4
		return o
	}
	about := fmt.Sprintf("client crashes and pauses, %d permits", semaphorePermits)
	return []cell{
		{lock: "redis-semaphore", faults: "crash", about: about, group: groupSemaphores,
			factory: backends.RedisSemaphore(semaphorePermits), opts: permits(propertytest.Options{})},
		{lock: "etcd-semaphore", faults: "crash", about: about + "; embedded etcd, real time", group: groupSemaphores,
			factory: backends.EtcdSemaphore(semaphorePermits), opts: permits(backends.EtcdLockOptions()), fewerSteps: 3, weight: realTimeWeight},
		{lock: "consul-semaphore", faults: "crash", about: about, group: groupSemaphores,
			factory: backends.ConsulSemaphore(semaphorePermits), opts: permits(backends.ConsulLockOptions())},
		{lock: "zk-semaphore", faults: "crash", about: about, group: groupSemaphores,
			factory: backends.ZKSemaphore(semaphorePermits), opts: permits(propertytest.Options{})},
	}
}

// rwLockCells are the read-write locks on the embedded backends (whatever
// real servers check was given), each client drawing the mode of each
// acquisition, with the options their factories' documentation gives.
// They run only when asked by name, as the semaphores do.
func rwLockCells() []cell {
	rw := func(o propertytest.Options) propertytest.Options {
		o.ReadWrite, o.Clients = true, 4
		return o
	}
	const about = "client crashes and pauses, readers and writers"
	return []cell{
		{lock: "redis-rwmutex", faults: "crash", about: about, group: groupRWLocks,
			factory: backends.RedisRWMutex(), opts: rw(propertytest.Options{})},
		{lock: "etcd-rwmutex", faults: "crash", about: about + "; embedded etcd, real time", group: groupRWLocks,
			factory: backends.EtcdRWMutex(), opts: rw(backends.EtcdLockOptions()), fewerSteps: 3, weight: realTimeWeight},
		{lock: "consul-rwmutex", faults: "crash", about: about, group: groupRWLocks,
			factory: backends.ConsulRWMutex(), opts: rw(backends.ConsulLockOptions())},
		{lock: "zk-rwmutex", faults: "crash", about: about, group: groupRWLocks,
			factory: backends.ZKRWMutex(), opts: rw(propertytest.Options{})},
	}
}

// reentrantCells are the built-in locks on the embedded backends with an
// owner per client (propertytest.Options.Reentrant: holders re-enter their
// acquisition and unlock the nested holds), each with the options of its
// builtin cell. They run only when asked by name.
func reentrantCells() []cell {
	owner := func(o propertytest.Options) propertytest.Options {
		o.Reentrant = true
		return o
	}
	const about = "client crashes and pauses, holders re-entering by owner"
	return []cell{
		{lock: "redislock-reentrant", faults: "crash", about: about, group: groupReentrant,
			factory: backends.RedisLock(), opts: owner(propertytest.Options{})},
		{lock: "redlock-reentrant", faults: "node-down", about: about + "; a minority of 5 nodes stopped and restarted; pauses (not claimed: no fencing)",
			group: groupReentrant, factory: backends.Redlock(5),
			opts: owner(propertytest.Options{Claims: []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultNodeDown}})},
		{lock: "etcdlock-reentrant", faults: "crash", about: about + "; the holder's lease revoked (not claimed); embedded etcd, real time", group: groupReentrant,
			factory: backends.EtcdLock(), opts: owner(backends.EtcdLockOptions()), fewerSteps: 3, weight: realTimeWeight},
		{lock: "consullock-reentrant", faults: "crash", about: about + "; the holder's session invalidated (not claimed)", group: groupReentrant,
			factory: backends.ConsulLock(), opts: owner(backends.ConsulLockOptions())},
		{lock: "mysqllock-reentrant", faults: "crash", about: about + "; the server's clock jumps past the holder's expiry (not claimed)", group: groupReentrant,
			factory: backends.MySQLLock(), opts: owner(propertytest.Options{})},
		{lock: "zklock-reentrant", faults: "crash", about: about + "; the holder's session expired while it trusts its lease (not claimed)", group: groupReentrant,
			factory: backends.ZKLock(), opts: owner(propertytest.Options{})},
	}
}

// byName are the cells check runs only when asked by name.
func byName() []cell {
	return slices.Concat(mutantCells(), semaphoreCells(), rwLockCells(), reentrantCells())
}

// allCells is every cell check knows, for replay.
func allCells(ep endpoints) []cell { return append(builtinCells(ep), byName()...) }

// selectCells picks the cells of the named locks and scenarios, among the
// cells on the lab's clusters if onClusters (clusterCells), else among
// the others. Empty lists
// select every built-in lock (mutants, semaphores and read-write locks
// only by name: "mutant/<name>" or "mutants" for all, "redis-semaphore", …
// or "semaphores" for all, "redis-rwmutex", … or "rwlocks" for all,
// "redislock-reentrant", … or "reentrant" for all) and every scenario.
func selectCells(ep endpoints, onClusters bool, lockList, faultList string) ([]cell, error) {
	wantLocks, wantFaults := splitList(lockList), splitList(faultList)
	pool, named := builtinCells(ep), byName()
	if onClusters {
		pool, named = clusterCells(clusterKinds()), nil
	}
	known := map[string]bool{}
	for _, c := range pool {
		known[c.lock] = true
	}
	for _, c := range named {
		if slices.Contains(wantLocks, c.lock) || slices.Contains(wantLocks, c.group) {
			pool = append(pool, c)
		}
		known[c.lock], known[c.group] = true, true
	}
	for _, l := range wantLocks {
		if !known[l] {
			return nil, fmt.Errorf("unknown lock %q (known: %s)", l, strings.Join(sortedKeys(known), ", "))
		}
	}
	faultsKnown := map[string]bool{}
	for _, c := range pool {
		faultsKnown[c.faults] = true
	}
	for _, f := range wantFaults {
		if !faultsKnown[f] {
			return nil, fmt.Errorf("unknown fault scenario %q (known: %s)", f, strings.Join(sortedKeys(faultsKnown), ", "))
		}
	}
	var out []cell
	for _, c := range pool {
		lockOK := len(wantLocks) == 0 && c.group == "" || slices.Contains(wantLocks, c.lock) ||
			c.group != "" && slices.Contains(wantLocks, c.group)
		faultOK := len(wantFaults) == 0 || slices.Contains(wantFaults, c.faults)
		if lockOK && faultOK {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cell matches -locks %q -faults %q", lockList, faultList)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
