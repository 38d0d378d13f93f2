package clusters

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes/lab"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redlock"
	"github.com/lockproof/lockproof/propertytest"
)

// redlockNodes is how many independent Redis nodes Redlock runs on, and
// restartedNodes how many of them (a majority, nodes 0 up) its fault
// restarts one after another.
const (
	redlockNodes   = 5
	restartedNodes = redlockNodes/2 + 1
)

// RedlockNodes are 5 independent Redis nodes of the lab (lab.RedisNodes),
// each persisting every write (appendfsync always) until a restart without
// its data, shared by the runs of one test, as Cluster is an etcd or
// ZooKeeper cluster.
type RedlockNodes struct {
	*lab.RedisNodes
	runs atomic.Int64

	mu    sync.Mutex
	wiped map[int]bool // nodes running without persistence, since a restart without their data
}

// RedisNodes starts 5 independent Redis nodes in the lab for t and closes
// them at t's cleanup; it skips and fails t as Etcd does.
func RedisNodes(t testing.TB) *RedlockNodes {
	t.Helper()
	return forTest(t, lab.RedisUnavailable(), "Redis nodes", startTimeout, StartRedisNodes)
}

// StartRedisNodes starts 5 independent Redis nodes in the lab (see
// lab.StartRedisNodes), logging through logf (nil: nowhere); Close ends
// them. The caller must run in the lab's sandbox.
func StartRedisNodes(ctx context.Context, logf func(format string, args ...any)) (*RedlockNodes, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	began := time.Now()
	r, err := lab.StartRedisNodes(ctx, lab.Options{Members: redlockNodes, Logf: logf})
	if err != nil {
		return nil, fmt.Errorf("clusters: %w", err)
	}
	logf("clusters: %d Redis nodes up in %v", redlockNodes, time.Since(began).Round(time.Millisecond))
	return &RedlockNodes{RedisNodes: r, wiped: map[int]bool{}}, nil
}

// RedlockOptions are the Options to run Redlock with: TTL 4s, so that a
// lease granted before a rolling restart (under 2s on a loaded machine)
// still runs when it ends; Slack 1s; Settle 50ms. Claims: a client's crash
// and a node restarted with its data (FaultNodeDown); not FaultPause (no
// fencing token) nor a node that forgets its keys (FaultNodeKill).
func RedlockOptions() propertytest.Options {
	return propertytest.Options{TTL: 4 * time.Second, Slack: time.Second, Settle: 50 * time.Millisecond,
		Claims: []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultNodeDown}}
}

// Redlock is the Factory of redlock on the 5 nodes of r, with one Ongoing
// fault: a rolling restart of a majority (nodes 0 to 2, one after another:
// the others keep a quorum up). With persist, each node comes back with
// every write it acknowledged (FaultNodeDown); without, empty, and it runs
// without persistence until a run with persist restarts it (FaultNodeKill):
// a lock a client holds is then free on a majority, and a second client is
// granted it, Redlock's weakness that Kleppmann pointed out; that fault is
// AtAcquire, so that it comes just before an acquisition. Every locker
// has a go-redis client per node through the lab's Dialer, its commands
// passing the suite's gate; each run's keys are under a prefix of its own.
// Run it with RedlockOptions.
func (r *RedlockNodes) Redlock(persist bool) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		if persist {
			if err := r.persistAll(); err != nil {
				return nil, err
			}
		}
		run := startRun(env, []propertytest.Fault{r.rollingRestart(env, persist)},
			fmt.Sprintf("lockproof-run-%d:", r.runs.Add(1)))
		be := &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				clients := make([]redis.UniversalClient, len(r.Members()))
				for i := range clients {
					c := r.Client(i)
					redisfake.Gate(c, fmt.Sprintf("redis node %d", i))
					run.onClose(func() { _ = c.Close() }) // fails only for a client closed already
					clients[i] = c
				}
				return redlock.New(clients, name, append([]locks.Option{locks.WithPrefix(run.prefix)}, opts...)...)
			},
			Faults: run.faults,
		}
		realTime(be)
		return be, nil
	}
}

// persistAll restarts with persistence the nodes an earlier run left
// without, which would lose their keys at their next restart. They come
// back empty, which no run minds: each run's keys are its own.
func (r *RedlockNodes) persistAll() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
	defer cancel()
	for i := range r.Members() {
		if !r.wiped[i] {
			continue
		}
		if err := r.Restart(ctx, i, true); err != nil {
			return fmt.Errorf("clusters: restarting Redis node %d with persistence: %w", i, err)
		}
		delete(r.wiped, i)
	}
	return nil
}

// rollingRestart is Redlock's fault; see there. Inject restarts the nodes
// and returns once each answers again, so Heal has nothing left to do.
func (r *RedlockNodes) rollingRestart(env propertytest.Env, persist bool) propertytest.Fault {
	kind, how, when := propertytest.FaultNodeDown, "with", propertytest.StrikeAny
	if !persist {
		// It frees a lock a client holds on a majority: the acquisition
		// it strikes around is a second grant.
		kind, how, when = propertytest.FaultNodeKill, "without", propertytest.StrikeHeld
	}
	return propertytest.Fault{
		Name: fmt.Sprintf("nodes 0 to %d restarted one by one %s their data (redis nodes)", restartedNodes-1, how),
		Kind: kind, Ongoing: true, AtAcquire: !persist, StrikeWhen: when,
		Inject: func() error {
			r.mu.Lock()
			defer r.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
			defer cancel()
			began := time.Now()
			for i := range restartedNodes {
				if err := r.Restart(ctx, i, persist); err != nil {
					return fmt.Errorf("clusters: restarting Redis node %d: %w", i, err)
				}
				r.wiped[i] = !persist
			}
			env.Logf("clusters: Redis nodes 0 to %d restarted %s their data in %v", restartedNodes-1, how,
				time.Since(began).Round(time.Millisecond))
			return nil
		},
		Heal: func() error { return nil },
	}
}
