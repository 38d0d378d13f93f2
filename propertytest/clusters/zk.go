package clusters

import (
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/lab"
	"github.com/lockproof/lockproof/internal/zkrace"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/zklock"
	"github.com/lockproof/lockproof/propertytest"
)

// zkConnectTimeout bounds the wait for a new client's session.
const zkConnectTimeout = 10 * time.Second

// ZKOptions are the Options to run ZKLock with: TTL 1s (each locker's
// session timeout, which the lab's servers, with a 200ms tick, grant
// unchanged: 0.4 to 4s), Slack 1s (the server expires sessions at tick
// boundaries, and a client's request crosses a network) and Settle 50ms.
// Claims: crash and pause (fenced by the node's czxid) and the three
// leader faults.
func ZKOptions() propertytest.Options {
	return propertytest.Options{TTL: time.Second, Slack: time.Second, Settle: 50 * time.Millisecond,
		Claims: leaderClaims()}
}

// ZKRecovery is the Recovery of a ZooKeeper ensemble of timing t: how much
// longer than on a steady ensemble a dead holder's session may live when
// the leader is lost just after the holder died:
//
//   - the followers give the leader up after syncLimit ticks without a
//     word from it (Election), and elect another (fast leader election:
//     milliseconds between namespaces, which the Slack covers);
//   - the new leader serves once a quorum of followers synced with it,
//     within initLimit ticks (Sync), and starts every session's timer
//     again then, for a whole session timeout.
func ZKRecovery(t lab.Timing) time.Duration { return t.Election + t.Sync }

// ZKLock is the Factory of zklock on c, a ZooKeeper ensemble of the lab,
// with the leader faults nemeses (AllNemeses if none), each Ongoing. Every
// locker has a connection of its own, to all the servers through the lab's
// Dialer, whose session timeout is its TTL. go-zookeeper's requests take no
// context, so they pass no gate. Each run's nodes are under a prefix of
// its own. Recovery is ZKRecovery of the ensemble's Timing. Run it with
// ZKOptions.
func (c *Cluster) ZKLock(nemeses ...Nemesis) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		r, err := c.newRun(env, "zookeeper", "/lockproof-run-%d", nemeses)
		if err != nil {
			return nil, err
		}
		be := &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				all := append([]locks.Option{locks.WithPrefix(r.prefix)}, opts...)
				o, err := locks.Resolve(zklock.DefaultPrefix, all...)
				if err != nil {
					return nil, fmt.Errorf("clusters: %w", err)
				}
				conn, err := c.connectZK(o.TTL)
				if err != nil {
					return nil, err
				}
				r.onClose(conn.Close)
				l, err := zklock.New(conn, name, all...)
				if err != nil {
					return nil, err
				}
				return l, nil
			},
			Faults:   r.faults,
			Recovery: ZKRecovery(c.Timing),
		}
		realTime(be)
		return be, nil
	}
}

// connectZK connects to every server of c through the lab's Dialer with a
// session timeout of session, and waits for the session. Its handshakes are
// bounded (zklock.HandshakeDialer): a paused leader accepts connections and
// would hold the client for 6⅔ session timeouts.
func (c *Cluster) connectZK(session time.Duration) (*zk.Conn, error) {
	dial := zklock.HandshakeDialer(c.Dialer().DialTimeout, zklock.HandshakeBound(session))
	conn, err := zkrace.Connect(c.ClientAddrs(), session, zkConnectTimeout, nil, zk.WithDialer(dial), zk.WithLogger(quiet{}))
	if err != nil {
		return nil, fmt.Errorf("clusters: %w", err)
	}
	return conn, nil
}

// quiet is a go-zookeeper logger that drops its lines: the client logs
// every reconnection, which the faults cause by design.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
