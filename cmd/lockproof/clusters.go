package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockproof/lockproof/fakes/lab"
	"github.com/lockproof/lockproof/linearize"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/clusters"
)

// clusterKind is one of the lab's real clusters that check -clusters runs
// cells on: whether it can run here, how to start it, and its cells. A new
// cluster is one entry of clusterKinds.
type clusterKind struct {
	name        string        // "etcd": in the plan and the errors
	unavailable func() string // why it cannot run here, or ""
	start       func(ctx context.Context, logf func(string, ...any)) (io.Closer, error)
	cells       []clusterCell
	// startLimit bounds start; 0: defaultStartLimit.
	startLimit time.Duration
}

// defaultStartLimit bounds a cluster's start: each takes seconds (etcd,
// ZooKeeper, Consul, Redis), so two minutes leave room for a loaded
// machine.
const defaultStartLimit = 2 * time.Minute

// galeraStartLimit bounds the Galera cluster's start, which took 30 to
// 68 s on this project's 2-core machines (each joiner copies the first
// node's data with mariadb-backup, one after the other).
const galeraStartLimit = 4 * time.Minute

// clusterCell is a cell on a cluster kind; its Factory is made from the
// running cluster, which start returned.
type clusterCell struct {
	lock, faults, about string
	opts                propertytest.Options
	factory             func(running io.Closer) propertytest.Factory
	fewerSteps          int // divides -steps for the cell; 0: clusterSteps
	// shows is the property the cell's unclaimed fault is stated to
	// break (cell.shows); "" for a cell stated to keep every claim.
	shows propertytest.Property
}

// startAs adapts a cluster's typed start function to clusterKind.start.
func startAs[C io.Closer](f func(context.Context, func(string, ...any)) (C, error)) func(context.Context, func(string, ...any)) (io.Closer, error) {
	return func(ctx context.Context, logf func(string, ...any)) (io.Closer, error) {
		c, err := f(ctx, logf)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// on adapts a Factory of a typed running cluster to clusterCell.factory.
func on[C io.Closer](f func(C) propertytest.Factory) func(io.Closer) propertytest.Factory {
	return func(running io.Closer) propertytest.Factory { return f(running.(C)) }
}

// clusterShrinkRuns bounds the minimization of a failure on a cluster,
// whose every candidate is a run of seconds in real time.
const clusterShrinkRuns = 5

// clusterRuns is the runs per cluster cell unless -runs or -budget says
// otherwise: enough for a property to pass (minRuns), and a run of both
// clusters well within 10 minutes on 2 cores.
const clusterRuns = minRuns

// clusterSteps divides -steps on the clusters: each action takes real time.
const clusterSteps = 3

// clusterKinds are the lab's clusters and the cells on each, in the order
// check runs them.
func clusterKinds() []clusterKind {
	const leader = "its leader isolated, killed and restarted, paused; client crashes and pauses; real time"
	opts := func(o propertytest.Options) propertytest.Options {
		o.ShrinkRuns = clusterShrinkRuns
		return o
	}
	return []clusterKind{
		{name: "etcd", unavailable: lab.EtcdUnavailable, start: startAs(clusters.StartEtcd), cells: []clusterCell{
			{lock: lockEtcd, faults: "leader", about: "3-member etcd in the lab, " + leader, opts: opts(clusters.EtcdOptions()),
				factory: on(func(c *clusters.Cluster) propertytest.Factory { return c.EtcdLock() })},
		}},
		{name: "zookeeper", unavailable: lab.ZooKeeperUnavailable, start: startAs(clusters.StartZooKeeper), cells: []clusterCell{
			{lock: lockZK, faults: "leader", about: "3-server ZooKeeper in the lab, " + leader, opts: opts(clusters.ZKOptions()),
				factory: on(func(c *clusters.Cluster) propertytest.Factory { return c.ZKLock() })},
		}},
		{name: "consul", unavailable: lab.ConsulUnavailable, start: startAs(clusters.StartConsul), cells: []clusterCell{
			{lock: lockConsul, faults: "leader", about: "3 Consul servers in the lab, clients spread over them, " + leader, opts: opts(clusters.ConsulOptions()),
				factory: on(func(c *clusters.Cluster) propertytest.Factory { return c.ConsulLock() })},
		}},
		{name: "redis", unavailable: lab.RedisUnavailable, start: startAs(clusters.StartRedisSentinel), cells: []clusterCell{
			{lock: lockRedis, faults: "failover",
				about:   "a Redis primary, 2 replicas and 3 Sentinels in the lab, the primary cut off from its replicas and then failed over (not claimed); client crashes and pauses; real time",
				opts:    opts(clusters.RedisOptions()),
				factory: on(func(r *clusters.RedisCluster) propertytest.Factory { return r.RedisLock() }),
				shows:   propertytest.Exclusivity},
		}},
		{name: "redis-nodes", unavailable: lab.RedisUnavailable, start: startAs(clusters.StartRedisNodes), cells: []clusterCell{
			{lock: lockRedlock, faults: "restart",
				about:   "5 independent Redis nodes in the lab (appendfsync always), a majority restarted one by one with their data; client crashes; pauses (not claimed: no fencing); real time",
				opts:    opts(clusters.RedlockOptions()),
				factory: on(func(r *clusters.RedlockNodes) propertytest.Factory { return r.Redlock(true) })},
			{lock: lockRedlock, faults: "restart-empty",
				about:   "5 independent Redis nodes in the lab, a majority restarted one by one without their data (not claimed: Redlock's known weakness); client crashes; pauses (not claimed); real time",
				opts:    opts(clusters.RedlockOptions()),
				factory: on(func(r *clusters.RedlockNodes) propertytest.Factory { return r.Redlock(false) }),
				shows:   propertytest.Exclusivity,
				// The whole -steps: the restart breaks the lock only when it
				// comes before an acquisition while another client holds
				// the lock, and of 5 runs of 10 steps, 2 had it.
				fewerSteps: 1},
		}},
		{name: "galera", unavailable: clusters.GaleraUnavailable, start: startAs(clusters.StartGalera), startLimit: galeraStartLimit, cells: []clusterCell{
			{lock: lockMySQL, faults: "skew",
				about:   fmt.Sprintf("3-node MariaDB Galera in the lab, every other client on node 2 and the rest on nodes 0 and 1, node 2's clock %v ahead (libfaketime, not claimed); client crashes and pauses; real time", clusters.GaleraSkew),
				opts:    opts(clusters.GaleraOptions()),
				factory: on(func(g *clusters.GaleraCluster) propertytest.Factory { return g.MySQLLock() }),
				shows:   propertytest.Exclusivity,
				// The whole -steps: the skew breaks the lock only when node
				// 2 serves an acquisition while another client holds the
				// lease, a few times a run of 30 steps, and runs are short.
				fewerSteps: 1},
		}},
	}
}

// clusterCells are the cells of kinds, in order, each knowing its kind.
func clusterCells(kinds []clusterKind) []cell {
	var cells []cell
	for i := range kinds {
		for _, cc := range kinds[i].cells {
			fewer := cc.fewerSteps
			if fewer == 0 {
				fewer = clusterSteps
			}
			cells = append(cells, cell{lock: cc.lock, faults: cc.faults, about: cc.about, opts: cc.opts,
				real: true, fewerSteps: fewer, kind: &kinds[i], onCluster: cc.factory, shows: cc.shows})
		}
	}
	return cells
}

// clustersMissing says what the selected cells' clusters need and do not
// find here (root, the lab's tools, a server), each reason once with the
// clusters it stops, or "" when they can all run.
func clustersMissing(cells []cell) string {
	var reasons []string
	stops := map[string][]string{}
	seen := map[*clusterKind]bool{}
	for _, c := range cells {
		if c.kind == nil || seen[c.kind] {
			continue
		}
		seen[c.kind] = true
		if why := c.kind.unavailable(); why != "" {
			if stops[why] == nil {
				reasons = append(reasons, why)
			}
			stops[why] = append(stops[why], c.kind.name)
		}
	}
	for i, why := range reasons {
		reasons[i] = fmt.Sprintf("%s (%s)", why, strings.Join(stops[why], ", "))
	}
	return strings.Join(reasons, "; ")
}

// clusterPlan is what a run on the clusters will do, printed before it.
func clusterPlan(cells []cell, cfg checkConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan: %s on the lab's real clusters, one cluster at a time, in real time", plural(len(cells), "cell", "cells"))
	if cfg.runs > 0 {
		fmt.Fprintf(&b, ", %s per cell", plural(cfg.runs, "run", "runs"))
	} else {
		fmt.Fprintf(&b, ", budget %v", cfg.budget)
	}
	var last *clusterKind
	for _, c := range cells {
		if c.kind != last {
			fmt.Fprintf(&b, "\n  %s cluster:", c.kind.name)
			last = c.kind
		}
		fmt.Fprintf(&b, "\n    %s: %s (%d steps a run on average", c.name(), c.statedOutcome(), c.stepsOf(cfg.steps))
		if c.shows != "" {
			b.WriteString("; it stops at the first run that shows it")
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, "\n  histories of violations: %s", cfg.outDir)
	return b.String()
}

// bestEffortNote is said once of every run on the clusters.
const bestEffortNote = "replays on real clusters are best effort: a seed replays the suite's steps and the fault schedule exactly, not the servers' timers (elections, lease and session expiries)"

// clusterLife starts each cell's cluster before its first cell and closes
// it after its last, so that one runs at a time, and closes the running
// one on an interrupt before the process exits.
type clusterLife struct {
	logf func(string, ...any)

	mu      sync.Mutex
	kind    *clusterKind
	running io.Closer
	err     error // why kind did not start

	stop chan struct{} // closed by done: the interrupt watcher returns
	wg   sync.WaitGroup
}

// notifyInterrupt routes an interrupt or SIGTERM to c. Tests replace it:
// the first signal.Notify leaves os/signal's receiving goroutine outside Go
// for the life of the process, and the scheduler then never finds a later
// in-process run quiescent by its cheap test: every later in-process
// test of the package would wait out the slow path, ten times as long.
var notifyInterrupt = func(c chan<- os.Signal) { signal.Notify(c, os.Interrupt, syscall.SIGTERM) }

// newClusterLife is a clusterLife that reports on note; it watches for
// an interrupt until done.
func newClusterLife(note func(string)) *clusterLife {
	l := &clusterLife{logf: func(string, ...any) {}, stop: make(chan struct{})}
	sig := make(chan os.Signal, 1)
	notifyInterrupt(sig)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer signal.Stop(sig)
		select {
		case s := <-sig:
			note(fmt.Sprintf("%v: closing the running cluster", s))
			l.mu.Lock()
			if l.running != nil {
				_ = l.running.Close() // the process exits next, whatever Close says
			}
			os.Exit(130)
		case <-l.stop:
		}
	}()
	return l
}

// factory is cells[i]'s Factory on its cluster, started first if it is
// not running; a cluster that failed to start is not tried again.
func (l *clusterLife) factory(cells []cell, i int, note func(string)) (propertytest.Factory, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := cells[i].kind
	if l.kind != k {
		l.kind, l.err = k, nil
		began := time.Now()
		note(fmt.Sprintf("starting the %s cluster", k.name))
		limit := k.startLimit
		if limit == 0 {
			limit = defaultStartLimit
		}
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		l.running, l.err = k.start(ctx, l.logf)
		cancel()
		if l.err == nil {
			note(fmt.Sprintf("the %s cluster is up in %.1fs", k.name, time.Since(began).Seconds()))
		}
	}
	if l.err != nil {
		return nil, fmt.Errorf("starting the %s cluster: %w", k.name, l.err)
	}
	return cells[i].onCluster(l.running), nil
}

// after closes cells[i]'s cluster unless a later cell runs on it.
func (l *clusterLife) after(cells []cell, i int, note func(string)) error {
	for _, c := range cells[i+1:] {
		if c.kind == cells[i].kind {
			return nil
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	running := l.running
	l.running = nil
	if running == nil {
		return nil
	}
	note(fmt.Sprintf("closing the %s cluster", cells[i].kind.name))
	if err := running.Close(); err != nil {
		return fmt.Errorf("closing the %s cluster: %w", cells[i].kind.name, err)
	}
	return nil
}

// done closes any cluster still running and stops watching for an
// interrupt.
func (l *clusterLife) done() error {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running == nil {
		return nil
	}
	err := l.running.Close()
	l.running = nil
	return err
}

// clusterFactory is cells[i]'s Factory: each run's backend on the cell's
// cluster, which the first run starts (life.factory).
func clusterFactory(life *clusterLife, cells []cell, i int, note func(string)) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		f, err := life.factory(cells, i, note)
		if err != nil {
			return nil, err
		}
		return f(env)
	}
}

// endpointFlags are the flags of a user's own servers, which -clusters
// refuses: it starts its own.
var endpointFlags = []string{"redis", "redis-nodes", "redis-sentinel", "etcd", "consul", "mysql", "zk", "nemesis", "nemesis-timeout", "link-faults"}

// sandboxMain enters the lab's sandbox: lab.SandboxMain, which outside it
// runs this command again inside it and exits with that run's status.
// Tests replace it.
var sandboxMain = lab.SandboxMain

// enterLab readies check -clusters once its flags are good: the default
// runs, what the lab and each selected cluster need (refused at once,
// naming what is missing), the sandbox, and the histories' directory.
func enterLab(cells []cell, f *checkFlags, fs *flag.FlagSet, stderr io.Writer) (int, bool) {
	if !flagGiven(fs, "runs") && !flagGiven(fs, "budget") {
		f.runs = clusterRuns
	}
	if code, ok := enterSandbox("lockproof check -clusters", cells, stderr); !ok {
		return code, false
	}
	if f.outDir == "" {
		dir, err := os.MkdirTemp("", "lockproof-clusters-")
		if err != nil {
			fmt.Fprintf(stderr, "lockproof check -clusters: the histories' directory: %v\n", err)
			return exitError, false
		}
		f.outDir = dir
	}
	return exitOK, true
}

// enterSandbox is what check -clusters and replay -clusters (cmd) need
// before they run cells: the lab turned on, what the cells' clusters need
// found here (refused at once, naming what is missing), and this process
// in the lab's sandbox.
func enterSandbox(cmd string, cells []cell, stderr io.Writer) (int, bool) {
	// -clusters is the user's consent to what lab.EnvLab turns on in tests.
	if err := os.Setenv(lab.EnvLab, "1"); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return exitError, false
	}
	if missing := clustersMissing(cells); missing != "" {
		fmt.Fprintf(stderr, "%s: cannot run here: %s\n", cmd, missing)
		return exitError, false
	}
	sandboxMain()
	if !lab.InSandbox() {
		fmt.Fprintf(stderr, "%s: not in the lab's sandbox after entering it\n", cmd)
		return exitError, false
	}
	return exitOK, true
}

// recheckExpected reads back the history file of every expected violation
// and checks it as lockproof history does (the same function, its output
// dropped), keeping the verdict in Rechecked.
func recheckExpected(res *checkResult) {
	for i := range res.Cells {
		for j := range res.Cells[i].Violations {
			if v := &res.Cells[i].Violations[j]; v.Status != statusViolated && v.File != "" {
				v.Rechecked = recheck(v.File)
			}
		}
	}
}

// recheck is lockproof history's verdict on the file path.
func recheck(path string) string {
	var errs strings.Builder
	switch history([]string{path}, io.Discard, &errs) {
	case exitOK:
		return linearize.Ok.String()
	case exitIllegal:
		return linearize.Illegal.String()
	case exitUnknown:
		return linearize.Unknown.String()
	}
	return "not read: " + strings.TrimSpace(errs.String())
}

// printRechecks says, for each expected violation whose history was saved,
// where, and what lockproof history said of it read back. A history found
// Ok carries a named check's finding (a holder that worked on past its
// lease, a probe granted beside a holder), which the lock's history alone
// does not show: its detail is printed under it.
func printRechecks(w io.Writer, res checkResult) {
	for _, c := range res.Cells {
		for _, v := range c.Violations {
			if v.Rechecked == "" {
				continue
			}
			fmt.Fprintf(w, "\n%s/%s: %s expected (under %s, not claimed); %s: %s", c.Lock, c.Faults, v.Property,
				strings.Join(v.Unclaimed, ", "), v.Recheck, v.Rechecked)
			if v.Rechecked != v.Verdict {
				fmt.Fprintf(w, " (the run's checker said %s)", v.Verdict)
			}
			fmt.Fprintln(w)
			if v.Rechecked == linearize.Ok.String() {
				fmt.Fprintf(w, "  the history alone is within the model: the finding is the run's own check: %s\n", v.Detail)
			}
		}
	}
}

// printStated says, for each cell on a lab cluster, the outcome the plan
// stated before the run and whether the runs showed it. A stated violation
// not shown is no finding about the lock: its fault breaks the lock only
// in some runs, and more runs (-runs) show it.
func printStated(w io.Writer, res checkResult) {
	header := false
	for _, c := range res.Cells {
		if c.Stated == "" {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\nstated before the run, and what the runs showed:\n")
			header = true
		}
		var got string
		switch {
		case c.Error != "":
			got = "not checked: " + c.Error
		case c.Violated:
			got = "NOT as stated: a claimed property was violated (below)"
		case c.Shown && c.Stated != statedPass:
			got = fmt.Sprintf("shown, in run %d", c.Runs)
		case c.Shown:
			got = fmt.Sprintf("as stated, in %s", plural(c.Runs, "run", "runs"))
		default:
			got = fmt.Sprintf("not shown in %s: the fault breaks the lock in some runs only; more -runs show it", plural(c.Runs, "run", "runs"))
		}
		fmt.Fprintf(w, "  %s/%s: %s: %s\n", c.Lock, c.Faults, c.Stated, got)
	}
}
