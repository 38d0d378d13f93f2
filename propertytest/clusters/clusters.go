package clusters

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/lab"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
)

// faultTimeout bounds each fault's injection or heal, the wait for a
// leader or a rejoin included.
const faultTimeout = 20 * time.Second

// startTimeout bounds a cluster's start.
const startTimeout = 60 * time.Second

// Nemesis is a fault on a cluster's leader that a Factory offers.
type Nemesis int

// The nemeses, each struck at the member leading when it is injected.
const (
	// IsolateLeader cuts the leader off from the other members (nftables
	// rules; the clients still reach it), FaultPartition; healed by
	// removing the rules.
	IsolateLeader Nemesis = iota
	// KillLeader kills the leader (SIGKILL), FaultNodeDown; healed by
	// restarting it with its data.
	KillLeader
	// PauseLeader stops the leader (SIGSTOP), FaultNodePause; healed by
	// resuming it (SIGCONT).
	PauseLeader
)

// AllNemeses are every Nemesis, the default of the Factories.
func AllNemeses() []Nemesis { return []Nemesis{IsolateLeader, KillLeader, PauseLeader} }

// String names the nemesis.
func (n Nemesis) String() string {
	switch n {
	case IsolateLeader:
		return "isolate the leader"
	case KillLeader:
		return "kill the leader"
	case PauseLeader:
		return "pause the leader"
	}
	return fmt.Sprintf("nemesis %d", int(n))
}

// Cluster is a lab cluster shared by the runs of one test: its Factories
// start no server, and give each run a key prefix of its own, so that no
// run meets an earlier run's lock state.
type Cluster struct {
	*lab.Cluster
	runs atomic.Int64
}

// Etcd starts a 3-member etcd cluster in the lab for t and closes it at
// t's cleanup. It skips t, saying why, where the lab or etcd is missing,
// and fails it if the lab is there but the test is not in a sandbox
// (TestMain must call lab.SandboxMain).
func Etcd(t testing.TB) *Cluster {
	t.Helper()
	return forTest(t, lab.EtcdUnavailable(), "etcd cluster", startTimeout, StartEtcd)
}

// ZooKeeper starts a 3-server ZooKeeper ensemble in the lab for t, as Etcd
// does an etcd cluster.
func ZooKeeper(t testing.TB) *Cluster {
	t.Helper()
	return forTest(t, lab.ZooKeeperUnavailable(), "ZooKeeper ensemble", startTimeout, StartZooKeeper)
}

// Consul starts 3 Consul servers in the lab for t, as Etcd does an etcd
// cluster.
func Consul(t testing.TB) *Cluster {
	t.Helper()
	return forTest(t, lab.ConsulUnavailable(), "Consul servers", startTimeout, StartConsul)
}

// StartEtcd starts a 3-member etcd cluster in the lab, for a program (a
// test calls Etcd): within ctx and at most a minute, logging to logf (nil:
// nowhere). The process must be in a sandbox (lab.SandboxMain). Close the
// cluster to end it.
func StartEtcd(ctx context.Context, logf func(format string, args ...any)) (*Cluster, error) {
	return start(ctx, logf, lab.StartEtcd)
}

// StartZooKeeper starts a 3-server ZooKeeper ensemble in the lab, as
// StartEtcd does an etcd cluster.
func StartZooKeeper(ctx context.Context, logf func(format string, args ...any)) (*Cluster, error) {
	return start(ctx, logf, lab.StartZooKeeper)
}

// StartConsul starts 3 Consul servers in the lab, as StartEtcd does an
// etcd cluster.
func StartConsul(ctx context.Context, logf func(format string, args ...any)) (*Cluster, error) {
	return start(ctx, logf, lab.StartConsul)
}

// forTest starts a cluster (what, in errors) for t with startCluster,
// within timeout, and closes it at t's cleanup: unavailable is why the
// cluster cannot run.
func forTest[C io.Closer](t testing.TB, unavailable, what string, timeout time.Duration, startCluster func(context.Context, func(string, ...any)) (C, error)) C {
	t.Helper()
	if unavailable != "" {
		t.Skip(unavailable)
	}
	if !lab.InSandbox() {
		t.Fatal("clusters: the lab is available but the test is not in a sandbox: call lab.SandboxMain from TestMain")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := startCluster(ctx, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("clusters: closing the %s: %v", what, err)
		}
	})
	return c
}

// start is StartEtcd, StartZooKeeper and StartConsul.
func start(ctx context.Context, logf func(string, ...any), startCluster func(context.Context, lab.Options) (*lab.Cluster, error)) (*Cluster, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	began := time.Now()
	c, err := startCluster(ctx, lab.Options{Logf: logf})
	if err != nil {
		return nil, fmt.Errorf("clusters: %w", err)
	}
	logf("clusters: %d %s members up with a leader in %v", len(c.Members()), c.Kind, time.Since(began).Round(time.Millisecond))
	return &Cluster{Cluster: c}, nil
}

// run is one run of a Factory on the cluster: its faults, its key prefix,
// and what to close at its end.
type run struct {
	faults []propertytest.Fault
	prefix string

	mu      sync.Mutex
	closers []func()
}

// newRun checks that c runs kind, numbers the run (from 1) and makes its
// faults; prefixFormat gets the number. Whatever the run's clients hand
// to onClose is closed at the run's end.
func (c *Cluster) newRun(env propertytest.Env, kind, prefixFormat string, nemeses []Nemesis) (*run, error) {
	if c.Kind != kind {
		return nil, fmt.Errorf("clusters: a %s lock on a %s cluster", kind, c.Kind)
	}
	faults, err := c.faults(env, nemeses)
	if err != nil {
		return nil, err
	}
	return startRun(env, faults, fmt.Sprintf(prefixFormat, c.runs.Add(1))), nil
}

// startRun is a run with faults and prefix; whatever its clients hand to
// onClose is closed at env's cleanup.
func startRun(env propertytest.Env, faults []propertytest.Fault, prefix string) *run {
	r := &run{faults: faults, prefix: prefix}
	env.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, f := range r.closers {
			f()
		}
	})
	return r
}

// onClose registers f to run at the run's end.
func (r *run) onClose(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closers = append(r.closers, f)
}

// faults returns the Faults of nemeses (AllNemeses if none) on c, each
// Ongoing: the suite strikes one again before each deadlock-freedom probe.
func (c *Cluster) faults(env propertytest.Env, nemeses []Nemesis) ([]propertytest.Fault, error) {
	if len(nemeses) == 0 {
		nemeses = AllNemeses()
	}
	var fs []propertytest.Fault
	one := &oneStrike{}
	for _, n := range nemeses {
		f, err := c.fault(env, n, one)
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// oneStrike keeps a run's nemeses to one struck member at a time. The
// suite may inject a second fault before it heals the first, and two
// members down of three leave no quorum (no leader to strike, and a run
// that fails on the fault, not on the lock): a nemesis injected while
// another's member is struck first repairs that one, whose own Heal then
// has nothing left to do.
type oneStrike struct {
	mu     sync.Mutex
	by     Nemesis
	repair func() error // the struck member's repair; nil when none is struck
}

// take returns the pending repair and clears it: any one, or only n's.
func (o *oneStrike) take(n Nemesis, anyones bool) func() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.repair == nil || !anyones && o.by != n {
		return nil
	}
	r := o.repair
	o.repair = nil
	return r
}

// set records n's strike and how to repair it.
func (o *oneStrike) set(n Nemesis, repair func() error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.by, o.repair = n, repair
}

// fault is nemesis n on c, sharing one with the run's other nemeses.
// Inject repairs the member another nemesis struck, if any, then waits
// for a leader and strikes it; Heal repairs the member struck and waits
// until it serves in the quorum again, so that the next fault never takes
// a second member of three.
func (c *Cluster) fault(env propertytest.Env, n Nemesis, one *oneStrike) (propertytest.Fault, error) {
	var kind propertytest.FaultKind
	var inject func(ctx context.Context, i int) error
	var repair func(ctx context.Context, i int) error
	switch n {
	case IsolateLeader:
		kind = propertytest.FaultPartition
		inject = func(ctx context.Context, i int) error {
			g, err := lab.Isolate(len(c.Members()), i)
			if err != nil {
				return err
			}
			return c.Apply(ctx, g)
		}
		repair = func(ctx context.Context, _ int) error { return c.Heal(ctx) }
	case KillLeader:
		kind = propertytest.FaultNodeDown
		inject = func(_ context.Context, i int) error { return c.Member(i).Kill() }
		repair = func(_ context.Context, i int) error { return c.Member(i).Restart(false) }
	case PauseLeader:
		kind = propertytest.FaultNodePause
		inject = func(_ context.Context, i int) error { return c.Member(i).Pause() }
		repair = func(_ context.Context, i int) error { return c.Member(i).Resume() }
	default:
		return propertytest.Fault{}, fmt.Errorf("clusters: unknown nemesis %d", int(n))
	}
	return propertytest.Fault{
		Name: fmt.Sprintf("%s (%s)", n, c.Kind), Kind: kind, Ongoing: true,
		Inject: func() error {
			if r := one.take(n, true); r != nil {
				if err := r(); err != nil {
					return err
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
			defer cancel()
			i, err := c.AwaitLeader(ctx)
			if err != nil {
				return fmt.Errorf("clusters: %s: %w", n, err)
			}
			env.Logf("clusters: %s: %s member %d", n, c.Kind, i)
			if err := inject(ctx, i); err != nil {
				return fmt.Errorf("clusters: %s: member %d: %w", n, i, err)
			}
			one.set(n, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
				defer cancel()
				if err := repair(ctx, i); err != nil {
					return fmt.Errorf("clusters: healing %s: member %d: %w", n, i, err)
				}
				if err := c.AwaitJoined(ctx, i); err != nil {
					return fmt.Errorf("clusters: healing %s: %w", n, err)
				}
				return nil
			})
			return nil
		},
		Heal: func() error {
			if r := one.take(n, false); r != nil {
				return r()
			}
			return nil
		},
	}, nil
}

// realTime fills in a Backend's clock: a real cluster keeps its own time,
// so the run does too, and Advance sleeps.
func realTime(be *propertytest.Backend) {
	be.Clock, be.Advance = locks.SystemClock{}, time.Sleep
}
