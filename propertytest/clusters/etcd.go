package clusters

import (
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/fakes/lab"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/etcdlock"
	"github.com/lockproof/lockproof/propertytest"
)

// EtcdOptions are the Options to run EtcdLock with: TTL 1.5s, Slack 1.25s
// and Settle 50ms, as for any etcd of the default timing (the lab's): the
// server raises a lease to 1.5 election timeouts rounded up to whole
// seconds (2s) and revokes it at a check every 500ms, so a crashed
// holder's key outlives the TTL by up to 1s on a steady cluster. Claims:
// crash and pause (fenced by the key's create revision) and the three
// leader faults.
func EtcdOptions() propertytest.Options {
	return propertytest.Options{TTL: 1500 * time.Millisecond, Slack: 1250 * time.Millisecond,
		Settle: 50 * time.Millisecond, Claims: leaderClaims()}
}

// leaderClaims are the fault kinds etcdlock and zklock claim on a lab
// cluster: a client's crash and pause, and a fault of the leader.
func leaderClaims() []propertytest.FaultKind {
	return []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultPause,
		propertytest.FaultPartition, propertytest.FaultNodeDown, propertytest.FaultNodePause}
}

// EtcdRecovery is the Recovery of an etcd cluster of timing t: how much
// longer than on a steady cluster a dead holder's lease may live when the
// leader is lost just after the holder died:
//
//   - the followers give the leader up after a randomized election
//     timeout, between Election and 2 Election, and elect another in one
//     round of votes (milliseconds between namespaces): up to 2 Election;
//   - the new leader restarts every lease's timer for its whole TTL plus
//     one Election (the lessor's Promote), wherever the old leader's timer
//     stood: one Election more.
func EtcdRecovery(t lab.Timing) time.Duration { return 2*t.Election + t.Election }

// EtcdLock is the Factory of etcdlock on c, an etcd cluster of the lab,
// with the leader faults nemeses (AllNemeses if none), each Ongoing.
// Every locker has a client of its own that knows all the members and
// dials through the lab's Dialer; its requests pass the suite's gate
// (etcdfake.GateDialOptions) and require a leader
// (etcdfake.RequireLeaderDialOptions: without it, a client waits on a
// member cut off from the majority until the caller gives up, the cause of
// issue 35's deadlock-freedom false alarm). Each run's keys are under a prefix of its
// own. Recovery is EtcdRecovery of the cluster's Timing. Run it with
// EtcdOptions.
func (c *Cluster) EtcdLock(nemeses ...Nemesis) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		r, err := c.newRun(env, "etcd", "lockproof-run-%d/", nemeses)
		if err != nil {
			return nil, err
		}
		be := &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				cli, err := c.etcdClient(slices.Concat(etcdfake.GateDialOptions(), etcdfake.RequireLeaderDialOptions())...)
				if err != nil {
					return nil, err
				}
				r.onClose(func() { _ = cli.Close() }) // fails only for a client closed already
				return etcdlock.New(cli, name, append([]locks.Option{locks.WithPrefix(r.prefix)}, opts...)...)
			},
			Faults:   r.faults,
			Recovery: EtcdRecovery(c.Timing),
		}
		realTime(be)
		return be, nil
	}
}

// etcdClient returns a client of every member of the cluster, dialing
// through the lab's Dialer, with opts besides.
func (c *Cluster) etcdClient(opts ...grpc.DialOption) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.ClientAddrs(),
		DialTimeout: 2 * time.Second,
		DialOptions: slices.Concat(opts, []grpc.DialOption{grpc.WithContextDialer(c.Dialer().DialTCP)}),
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("clusters: etcd client: %w", err)
	}
	return cli, nil
}
