package clusters

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes/lab"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/propertytest"
)

// RedisCluster is a lab Redis group behind Sentinels (a primary, two
// replicas, three Sentinels) shared by the runs of one test, as Cluster is
// an etcd or ZooKeeper cluster.
type RedisCluster struct {
	*lab.RedisSentinel
	runs atomic.Int64
}

// RedisSentinel starts a Redis Sentinel group in the lab for t and closes
// it at t's cleanup; it skips and fails t as Etcd does.
func RedisSentinel(t testing.TB) *RedisCluster {
	t.Helper()
	return forTest(t, lab.RedisUnavailable(), "Redis Sentinel group", startTimeout, StartRedisSentinel)
}

// StartRedisSentinel starts a Redis Sentinel group in the lab (see
// lab.StartRedisSentinel), logging through logf; Close ends it. The
// caller must run in the lab's sandbox.
func StartRedisSentinel(ctx context.Context, logf func(format string, args ...any)) (*RedisCluster, error) {
	began := time.Now()
	r, err := lab.StartRedisSentinel(ctx, lab.Options{Logf: logf})
	if err != nil {
		return nil, err
	}
	logf("clusters: a Redis primary, 2 replicas and 3 Sentinels up in %v", time.Since(began).Round(time.Millisecond))
	return &RedisCluster{RedisSentinel: r}, nil
}

// RedisRecovery is how long the group may refuse writes after its primary
// died: the Sentinels take it for down after down-after-milliseconds (1s),
// agree and promote a replica (a second or two on the lab's links), and a
// failover client finds the new primary at its next command; 5s covers
// the 2.4 to 2.6s measured on an idle machine twice over.
const RedisRecovery = 5 * time.Second

// RedisOptions are the Options to run RedisLock with: TTL 8s, so that a
// lease granted while the primary is cut off is still running when the
// group has failed over (a Heal takes about 3s) and another client is
// granted the lock; Slack 2s; Settle 50ms. Claims: the defaults (crash and
// pause): redislock does not claim a failover, which loses a lock the
// primary acknowledged but had not replicated.
func RedisOptions() propertytest.Options {
	return propertytest.Options{TTL: 8 * time.Second, Slack: 2 * time.Second, Settle: 50 * time.Millisecond}
}

// RedisLock is the Factory of redislock through the Sentinels: every
// locker has a go-redis failover client of its own, dialing through the
// lab's Dialer, its commands passing the suite's gate. One fault, of kind
// FaultFailover (which redislock does not claim): Inject cuts the primary
// off from its replicas (clients and Sentinels still reach it, so it
// acknowledges writes it cannot replicate); Heal kills it, waits for the
// Sentinels to promote a replica, lifts the partition and restarts the old
// primary, which comes back as a replica of the new one. A lock granted
// between the two is lost in the failover, and its holder still trusts its
// lease: two holders. The fault is AtAcquire: struck around an acquisition,
// it loses the grant made inside it. Each run's keys are under a prefix of its own.
// Recovery is RedisRecovery. Run it with RedisOptions.
func (r *RedisCluster) RedisLock() propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		prefix := fmt.Sprintf("lockproof-run-%d:", r.runs.Add(1))
		var mu sync.Mutex
		var clients []*redis.Client
		env.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range clients {
				_ = c.Close() // fails only for a client closed already
			}
		})
		be := &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				c := r.FailoverClient()
				redisfake.Gate(c, "redis node 0")
				mu.Lock()
				clients = append(clients, c)
				mu.Unlock()
				return redislock.New(c, name, append([]locks.Option{locks.WithPrefix(prefix)}, opts...)...)
			},
			Faults:   []propertytest.Fault{r.failover(env)},
			Recovery: RedisRecovery,
		}
		realTime(be)
		return be, nil
	}
}

// failover is RedisLock's fault; see there. The suite calls Inject and
// Heal from one goroutine.
func (r *RedisCluster) failover(env propertytest.Env) propertytest.Fault {
	cut := -1 // the primary cut off, while the fault is on
	heal := func() error {
		if cut < 0 {
			return nil
		}
		old := cut
		cut = -1
		ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
		defer cancel()
		if err := r.Member(old).Kill(); err != nil {
			return fmt.Errorf("clusters: killing Redis primary %d: %w", old, err)
		}
		next, err := r.AwaitFailover(ctx, old)
		if err != nil {
			return fmt.Errorf("clusters: %w", err)
		}
		// The partition stays until the promotion: lifted earlier, the
		// dead primary's unsent replication stream could still reach the
		// replica and save the lock this fault is meant to lose.
		if err := r.Heal(ctx); err != nil {
			return fmt.Errorf("clusters: %w", err)
		}
		if err := r.Member(old).Restart(false); err != nil {
			return fmt.Errorf("clusters: restarting Redis server %d: %w", old, err)
		}
		env.Logf("clusters: Redis primary %d killed, server %d promoted, %d restarted", old, next, old)
		return nil
	}
	return propertytest.Fault{
		Name: "the primary cut off from its replicas, then failed over (redis)", Kind: propertytest.FaultFailover,
		AtAcquire: true, StrikeWhen: propertytest.StrikeFree, // it loses a grant made on a free lock
		Inject: func() error {
			if err := heal(); err != nil { // injected twice: the first one ends
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), faultTimeout)
			defer cancel()
			primary, err := r.AwaitSettled(ctx)
			if err != nil {
				return fmt.Errorf("clusters: %w", err)
			}
			replicas := slices.DeleteFunc(r.Servers(), func(i int) bool { return i == primary })
			if err := r.Apply(ctx, lab.Grudge{primary: replicas}); err != nil {
				return fmt.Errorf("clusters: cutting Redis server %d off: %w", primary, err)
			}
			env.Logf("clusters: Redis primary %d cut off from its replicas %v", primary, replicas)
			cut = primary
			return nil
		},
		Heal: heal,
	}
}
