package clusters

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/fakes/lab"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/consullock"
	"github.com/lockproof/lockproof/propertytest"
)

// consulCleanTimeout bounds the deletion of a run's keys at its end.
const consulCleanTimeout = 10 * time.Second

// ConsulOptions are the Options to run ConsulLock with: TTL 1s (the lab's
// lab.ConsulSessionTTLMin), Slack 3s and Settle 50ms. On a steady cluster
// a crashed holder's lock is free 3 TTLs after its last renewal: the
// leader invalidates a session 2 TTLs after its last renewal (Consul's
// SessionTTLMultiplier), and the lock-delay (one TTL) follows. The Slack
// is those 2 TTLs and 1s for the invalidation and the probe's own
// requests, each a Raft write. Claims: crash and pause (fenced by the
// key's ModifyIndex) and the three leader faults.
func ConsulOptions() propertytest.Options {
	return propertytest.Options{TTL: lab.ConsulSessionTTLMin, Slack: 3 * time.Second,
		Settle: 50 * time.Millisecond, Claims: leaderClaims()}
}

// ConsulRecovery is the Recovery of a Consul cluster of timing t: how much
// longer than on a steady cluster a dead holder's lock may stay taken when
// the leader is struck just after the holder died. On a steady cluster the
// lock is free 3 TTLs after the holder's last renewal (see ConsulOptions).
// After a leader fault:
//
//   - the followers give the leader up after a randomized heartbeat
//     timeout, between Election and 2 Election, and elect another in one
//     round of (pre)votes (milliseconds between namespaces): up to 2
//     Election;
//   - the new leader starts every session's timer again, for 2 TTLs, so
//     the dead holder's session ends at most 2 Election + 2 TTLs after the
//     fault, and the lock-delay, one TTL, follows as on a steady cluster:
//     nothing more.
//
// The gossip declares the struck server failed 4 to 8s after the fault
// (memberlist's LAN defaults on 3 members: probes every 1s, a failed probe
// within 1s, 4s of suspicion), which invalidates the sessions made through
// it: that ends a dead holder's session sooner, never later, with the same
// lock-delay. The server refuses sessions until it is back in the gossip,
// which the repair awaits (lab.Cluster.AwaitJoined) before the next fault;
// a probe made through the server struck fails and is tried again after
// the next strike, which falls on another leader.
func ConsulRecovery(t lab.Timing) time.Duration { return 2 * t.Election }

// ConsulLock is the Factory of consullock on c, a Consul cluster of the
// lab, with the leader faults nemeses (AllNemeses if none), each Ongoing.
// Consul's client talks to one server: the lockers of a run are spread
// over the servers in turn (the i-th on server i mod 3), each on a client
// of its own whose requests pass the suite's gate
// (consulfake.GateTransport) and dial through the lab's Dialer. A session
// belongs to the server it was made through, and is bound to that
// server's serfHealth check. Each Locker has the default lock-delay, one
// TTL. Each run's keys are under a prefix of its own, deleted at its end.
// Recovery is ConsulRecovery of the cluster's Timing. Run it with
// ConsulOptions.
func (c *Cluster) ConsulLock(nemeses ...Nemesis) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		r, err := c.newRun(env, "consul", "lockproof-run-%d/", nemeses)
		if err != nil {
			return nil, err
		}
		var made atomic.Int64
		be := &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				all := append([]locks.Option{locks.WithPrefix(r.prefix)}, opts...)
				o, err := locks.Resolve(consullock.DefaultPrefix, all...)
				if err != nil {
					return nil, fmt.Errorf("clusters: %w", err)
				}
				client, err := c.consulClient(r, int(made.Add(1)-1)%len(c.Members()))
				if err != nil {
					return nil, err
				}
				s := consullock.Session{LockDelay: consullock.DefaultLockDelay(o.TTL), TTLMin: lab.ConsulSessionTTLMin}
				return consullock.NewWithSession(client, name, s, all...)
			},
			Faults:   r.faults,
			Recovery: ConsulRecovery(c.Timing),
		}
		env.Cleanup(func() { c.deleteConsulKeys(env, r.prefix) })
		realTime(be)
		return be, nil
	}
}

// consulClient is a gated client of member i's HTTP API, dialing through
// the lab's Dialer; its idle connections are closed at the run's end.
func (c *Cluster) consulClient(r *run, i int) (*api.Client, error) {
	tr := &http.Transport{DialContext: c.Dialer().DialContext, MaxIdleConnsPerHost: 16}
	client, err := api.NewClient(&api.Config{Address: c.ClientAddr(i), Scheme: "http",
		HttpClient: &http.Client{Transport: consulfake.GateTransport(tr)}})
	if err != nil {
		return nil, fmt.Errorf("clusters: consul client of member %d: %w", i, err)
	}
	r.onClose(tr.CloseIdleConnections)
	return client, nil
}

// deleteConsulKeys deletes the keys under prefix through the leader, once
// the run's faults are healed; a failure is logged (the next run has a
// prefix of its own).
func (c *Cluster) deleteConsulKeys(env propertytest.Env, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), consulCleanTimeout)
	defer cancel()
	err := func() error {
		i, err := c.AwaitLeader(ctx)
		if err != nil {
			return err
		}
		admin, err := c.ConsulClient(i)
		if err != nil {
			return err
		}
		_, err = admin.KV().DeleteTree(prefix, (&api.WriteOptions{}).WithContext(ctx))
		return err
	}()
	if err != nil {
		env.Logf("clusters: deleting %s*: %v", prefix, err)
	}
}
