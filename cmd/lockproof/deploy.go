package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
)

// deployment is what check and replay are told about a user's own
// replicated deployment beyond one server per backend.
type deployment struct {
	master         string        // the Sentinel master's name (-redis-sentinel)
	sentinels      []string      // the Sentinels' host:port
	nemesis        string        // the user's fault command (-nemesis)
	nemesisTimeout time.Duration // the bound on one call of it
	links          bool          // client-to-node links behind proxies, with faults (-link-faults)
}

// nemesisUsage documents -nemesis's protocol in the flag's usage.
var nemesisUsage = "call `CMD`, a command, to strike the nodes of the real servers given (not the embedded backends) at points drawn from the seed, " +
	"as CMD <action> <node>: kill and start (fault kind node-down: the node comes back with its data), pause and resume (node-pause), " +
	"partition and heal (partition: the node cut off from the others and from the clients), skew and unskew (clock-skew). " +
	"Nodes are numbered from 0 in the order the cell's flag lists its servers (-redis-sentinel: its Sentinels' addresses; -redis: one node); " +
	"the environment holds LOCKPROOF_NEMESIS_TARGET (the lock: redislock, zklock, …) and LOCKPROOF_NEMESIS_NODES. " +
	"Exit status 0: done; any other, or no exit within -nemesis-timeout, fails the run with the command's stderr; its stdout goes to the run's log. " +
	"A fault still injected at the end of a run is healed then. The locks do not claim these faults: what they break is reported as expected"

// deployFlags registers the flags of a user's deployment on fs.
func (ep *endpoints) deployFlags(fs *flag.FlagSet, usage string) {
	fs.Func("redis-sentinel", fmt.Sprintf(usage, lockRedis,
		"the Redis primary that these Sentinels watch (`NAME@host:port,…`: the master's name, then the Sentinels' host:port, comma-separated), through go-redis's failover client", "miniredis"),
		func(s string) error {
			master, addrs, ok := strings.Cut(s, "@")
			if !ok || master == "" || strings.Contains(addrs, "@") {
				return fmt.Errorf("want NAME@host:port,host:port,…, got %q", s)
			}
			if err := hostPortList(&ep.deploy.sentinels, addrs); err != nil {
				return err
			}
			ep.deploy.master = master
			return nil
		})
	fs.StringVar(&ep.deploy.nemesis, "nemesis", "", nemesisUsage)
	fs.DurationVar(&ep.deploy.nemesisTimeout, "nemesis-timeout", backends.NemesisTimeout, "the bound on one call of the -nemesis command")
	fs.BoolVar(&ep.deploy.links, "link-faults", true,
		"on a replicated deployment (-redis-sentinel, or several servers in -zk, -consul or -mysql), put each client's link to each node behind a proxy of its own and "+
			"inject partitions on them: "+strings.Join(backends.LinkFaultNames(), "; ")+" (kind partition, not claimed); -link-faults=false: clients dial the nodes directly")
}

// deployOptions are the options of the deployment factories that the
// flags ask for.
func (d deployment) options() []backends.DeployOption {
	if d.links {
		return nil
	}
	return []backends.DeployOption{backends.WithoutLinkFaults()}
}

// linked reports whether real cell c runs with faults on its clients'
// links: a replicated deployment, with -link-faults.
func (ep *endpoints) linked(c *cell) bool {
	if !ep.deploy.links || !c.real {
		return false
	}
	switch {
	case strings.HasPrefix(c.faults, faultsSentinel):
		return true
	case c.lock == lockConsul, c.lock == lockMySQL, c.lock == lockZK:
		return ep.nodesOf(c) > 1 // the list forms of their flags
	}
	return false
}

// hostPortList sets *dst to the comma-separated host:port addresses of s,
// or reports what is wrong with them.
func hostPortList(dst *[]string, s string) error {
	addrs := splitList(s)
	if len(addrs) == 0 {
		return errors.New("no address")
	}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		n, nerr := strconv.Atoi(port)
		if err != nil || host == "" || nerr != nil || n < 1 || n > 65535 {
			return fmt.Errorf("want host:port with a host and a port from 1 to 65535, got %q", a)
		}
	}
	*dst = addrs
	return nil
}

// deployProblems records what is wrong with the deployment's flags: a list
// entry that is not a host:port or a DSN without a database, a -nemesis
// that is not an executable, or one with no real server to strike.
func (ep *endpoints) deployProblems(bad *flagProblems) {
	for _, a := range splitList(ep.consul) {
		bad.hostPort("consul", a)
	}
	for _, d := range splitList(ep.mysql) {
		cfg, err := mysql.ParseDSN(d)
		switch {
		case err != nil:
			bad.need(false, "mysql", d, fmt.Sprintf("want a DSN such as root@tcp(127.0.0.1:3306)/ (several separated by commas): %v", err))
		case cfg.DBName != "":
			bad.need(false, "mysql", d, "want a DSN without a database: the run creates and drops its own")
		}
	}
	if ep.deploy.nemesis == "" {
		return
	}
	if _, err := exec.LookPath(ep.deploy.nemesis); err != nil {
		bad.need(false, "nemesis", ep.deploy.nemesis, fmt.Sprintf("want an executable: %v", err))
	}
	bad.need(ep.real(), "nemesis", ep.deploy.nemesis, "want real servers to strike (-redis, -redis-sentinel, -redis-nodes, -etcd, -consul, -mysql or -zk)")
	bad.need(ep.deploy.nemesisTimeout > 0, "nemesis-timeout", ep.deploy.nemesisTimeout, "want a positive duration")
}

// real reports whether any real server was given.
func (ep *endpoints) real() bool {
	return ep.redis != "" || len(ep.redisNodes) > 0 || len(ep.etcd) > 0 || ep.consul != "" || ep.mysql != "" || ep.zk != "" ||
		len(ep.deploy.sentinels) > 0
}

// consulFactory is consullock on the agents of -consul: one, or a client
// per agent in turn.
func (ep *endpoints) consulFactory() propertytest.Factory {
	if addrs := splitList(ep.consul); len(addrs) > 1 {
		return backends.ConsulLockOnAll(addrs, ep.deploy.options()...)
	}
	return backends.ConsulLockOn(ep.consul)
}

// mysqlFactory is mysqllock on the DSNs of -mysql: one server, or the
// nodes of one replicated deployment, a client per node in turn.
func (ep *endpoints) mysqlFactory() propertytest.Factory {
	if dsns := splitList(ep.mysql); len(dsns) > 1 {
		return backends.MySQLLockOnAll(dsns, ep.deploy.options()...)
	}
	return backends.MySQLLockOn(ep.mysql)
}

// zkFactory is zklock on the servers of -zk: one, or an ensemble whose
// every client knows all servers and starts at its own.
func (ep *endpoints) zkFactory() propertytest.Factory {
	if addrs := splitList(ep.zk); len(addrs) > 1 {
		return backends.ZKLockOnAll(addrs, ep.deploy.options()...)
	}
	return backends.ZKLockOn(ep.zk)
}

// faultsSentinel is the scenario of redislock through Sentinel.
const faultsSentinel = "sentinel"

// deployCells adds to the built-in cells those of the user's deployment:
// redislock through Sentinel in place of the embedded redislock cells
// (unless -redis gave a real Redis); renames the scenario of each cell on
// a replicated deployment "<scenario>+links" while -link-faults is on;
// and, with -nemesis, puts the nemesis on every real cell, renaming its
// scenario "<scenario>+nemesis". So a seed replays only with the same
// flags.
func (ep *endpoints) deployCells(cells []cell) []cell {
	d := ep.deploy
	if len(d.sentinels) > 0 {
		if ep.redis == "" {
			cells = slices.DeleteFunc(cells, func(c cell) bool { return c.lock == lockRedis })
		}
		cells = append(cells, cell{lock: lockRedis, faults: faultsSentinel, real: true,
			about:   fmt.Sprintf("client crashes and pauses, real Redis primary %q through Sentinels at %s, real time (a failover is not claimed)", d.master, strings.Join(d.sentinels, ",")),
			factory: backends.RedisLockViaSentinel(d.master, d.sentinels, d.options()...), opts: propertytest.Options{TTL: realTTL}})
	}
	for i := range cells {
		if c := &cells[i]; ep.linked(c) {
			c.faults += "+links"
			c.about += "; each client's link to each node through a proxy of its own, partitioned or losing replies (not claimed)"
		}
	}
	if d.nemesis == "" {
		return cells
	}
	for i := range cells {
		c := &cells[i]
		if !c.real {
			continue
		}
		n := ep.nodesOf(c)
		c.faults += "+nemesis"
		c.about += fmt.Sprintf("; %s on its %d node(s): node-down, node-pause, partition, clock-skew (not claimed)", d.nemesis, n)
		c.factory = backends.WithNemesis(c.factory, backends.Nemesis{Path: d.nemesis, Nodes: n, Target: c.lock, Timeout: d.nemesisTimeout})
	}
	return cells
}

// nodesOf is the number of nodes the nemesis may strike in real cell c:
// the servers its flag listed.
func (ep *endpoints) nodesOf(c *cell) int {
	switch {
	case strings.HasPrefix(c.faults, faultsSentinel):
		return len(ep.deploy.sentinels)
	case c.lock == lockRedlock:
		return len(ep.redisNodes)
	case c.lock == lockEtcd:
		return len(ep.etcd)
	case c.lock == lockConsul:
		return len(splitList(ep.consul))
	case c.lock == lockMySQL:
		return len(splitList(ep.mysql))
	case c.lock == lockZK:
		return len(splitList(ep.zk))
	}
	return 1
}
