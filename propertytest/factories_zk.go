package propertytest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/zklock"
)

// zkSession is the session timeout of every client of the minizk
// factories, and zkTick the tickTime that lets minizk grant it (sessions
// of 2 to 20 ticks). See ZKLock for why it is an hour.
const (
	zkSession = time.Hour
	zkTick    = zkSession / 20
)

// zkTimeout bounds the connects and housekeeping requests of the ZooKeeper
// factories.
const zkTimeout = 10 * time.Second

// ZKLockOnOptions are the Options to run ZKLockOn with: TTL 1s (the session
// timeout, which the server must grant: CI's server, tickTime 200ms,
// grants 0.4 to 60s), Slack 1s and Settle 50ms for a real server in real
// time (see ZKLockOn).
func ZKLockOnOptions() Options {
	return Options{TTL: time.Second, Slack: time.Second, Settle: 50 * time.Millisecond}
}

// ZKLock is the Factory of zklock on minizk in manual time (fakes.ZooKeeper
// with ZooKeeperManualTime and ForceMinizk: never a real server). Each
// Locker has a connection of its own. The default Options fit: a crashed
// holder's lease ends at its local deadline, when its node is deleted
// (zklock's lease monitor does so without the watchdog). Claims: the
// defaults, FaultCrash and FaultPause (fenced by the node's czxid).
//
// Every session's timeout is an hour of the manual clock, far above any
// TTL (zklock needs the TTL no longer than the session timeout; a shorter
// lease is safe, it only gives the lock up sooner). A session timeout
// near the TTL does not work in manual time: go-zookeeper pings on the
// wall clock while minizk counts the timeout on the manual one, so every
// Advance longer than the TTL would expire every session, and each client
// would then spend two seconds of wall time reconnecting (go-zookeeper
// sleeps a second before each round of dialling its one server). So
// sessions end only by the fault below, and at the end of the run.
//
// It offers one fault, FaultClockJump: the holder's session is expired now,
// as the server does when its clock jumps past the session's timeout. That
// is the one way a ZooKeeper session ends while its holder still trusts
// its lease: zklock counts the lease from the last request the server
// answered, so a partition or a crashed client ends the lease before the
// server may expire the session. The next waiter is granted the lock at once,
// before the holder's local deadline, so zklock does not claim it, and the
// suite reports what it breaks as expected violations.
func ZKLock() Factory {
	return func(env Env) (*Backend, error) {
		z, err := fakes.StartZooKeeper(fakes.ZooKeeperManualTime(epoch), fakes.ForceMinizk(), fakes.ZooKeeperTickTime(zkTick))
		if err != nil {
			return nil, err
		}
		CloseAtCleanup(env, "the ZooKeeper fake", z)
		// Before the fake closes its clients: time runs out for every lease
		// left, so that their monitors end with them.
		env.Cleanup(func() { z.Advance(time.Hour) })
		be := newZKBackend(z, func(_ int, _ time.Duration) (*zk.Conn, error) {
			c, _, err := z.Connect(zkSession)
			return c, err
		})
		be.Clock, be.Advance = z.Clock(), z.Advance
		be.Faults = []Fault{expireHolderFault(z, be)}
		return be.Backend, nil
	}
}

// ZKLockOn is the Factory of zklock on the real ZooKeeper server at addr
// (host:port), under a node of its own (fakes.ZooKeeper's Prefix) that is
// deleted after every run. A real server keeps its own time, so the run
// does too: Clock is the system clock and Advance sleeps. Each Locker has
// a connection of its own whose requested session timeout is its TTL: the
// server must grant it unchanged (its minSessionTimeout at most the TTL,
// its maxSessionTimeout at least), or the lease would outlive a session
// the server expires sooner. Run it with ZKLockOnOptions (TTL 1s; CI's
// server, with tickTime 200ms, grants sessions of 0.4 to 60s; ZooKeeper's
// default tickTime of 2s grants no less than 4s, so use TTL 4s there).
// Claims: the defaults. No backend fault. It chooses the server with
// fakes.ZooKeeperAt, not through the environment.
func ZKLockOn(addr string) Factory {
	return func(env Env) (*Backend, error) {
		if addr == "" {
			return nil, errors.New("propertytest: ZKLockOn needs the server's address")
		}
		z, err := fakes.StartZooKeeper(fakes.ZooKeeperAt(addr))
		if err != nil {
			return nil, fmt.Errorf("propertytest: %w", err)
		}
		CloseAtCleanup(env, "the ZooKeeper fake", z)
		be := newZKBackend(z, func(_ int, ttl time.Duration) (*zk.Conn, error) {
			c, _, err := z.Connect(ttl)
			return c, err
		})
		be.Clock, be.Advance = locks.SystemClock{}, time.Sleep
		return be.Backend, nil
	}
}

// zkBackend is a Backend of zklock, and the node of the lock its lockers
// were made for (the fault needs it).
type zkBackend struct {
	*Backend
	mu   sync.Mutex
	node string
}

func (b *zkBackend) lockNode() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.node
}

// newZKBackend returns a zkBackend whose i-th locker has a connection of
// its own from connect (given the locker's TTL), and the fake's options
// (prefix, clock) before the suite's. On minizk it checks that the session
// timeout granted is at least the TTL. Clock and Advance are left to the
// caller.
func newZKBackend(z *fakes.ZooKeeperServer, connect func(i int, ttl time.Duration) (*zk.Conn, error)) *zkBackend {
	be := &zkBackend{}
	clients := 0
	be.Backend = &Backend{
		NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
			all := append(slices.Clone(z.LockOptions()), opts...)
			o, err := locks.Resolve(zklock.DefaultPrefix, all...)
			if err != nil {
				return nil, fmt.Errorf("propertytest: %w", err)
			}
			conn, err := connect(clients, o.TTL)
			clients++
			if err != nil {
				return nil, err
			}
			if m := z.Minizk(); m != nil {
				granted, err := m.SessionTimeout(conn.SessionID())
				if err != nil {
					return nil, fmt.Errorf("propertytest: %w", err)
				}
				if granted < o.TTL {
					return nil, fmt.Errorf("propertytest: minizk granted a session timeout of %v, below the TTL %v", granted, o.TTL)
				}
			}
			l, err := zklock.New(conn, name, all...)
			if err != nil {
				return nil, err
			}
			be.mu.Lock()
			be.node = l.NodePath()
			be.mu.Unlock()
			return l, nil
		},
	}
	return be
}

// expireHolderFault is the FaultClockJump of the minizk factories: the
// holder's session expired now.
func expireHolderFault(z *fakes.ZooKeeperServer, be *zkBackend) Fault {
	return Fault{
		Name: "expire the holder's session (the server's clock jumps)", Kind: FaultClockJump,
		Inject: func() error { return expireZKHolder(z, be.lockNode()) },
	}
}

// expireZKHolder expires the session of the contender with the lowest
// sequence number under node, if any.
func expireZKHolder(z *fakes.ZooKeeperServer, node string) error {
	m := z.Minizk()
	if m == nil {
		return errors.New("propertytest: expiring a session needs minizk")
	}
	if node == "" {
		return nil // no locker yet
	}
	kids, err := m.Children(node)
	if err != nil {
		return nil // no node: nobody holds the lock
	}
	holder, lowest := "", ""
	for _, k := range kids {
		i := strings.LastIndex(k, "-lock-")
		if i < 0 {
			continue
		}
		if seq := k[i+len("-lock-"):]; holder == "" || seq < lowest {
			holder, lowest = k, seq
		}
	}
	if holder == "" {
		return nil
	}
	_, st, err := m.Get(node + "/" + holder)
	if err != nil || st.EphemeralOwner == 0 {
		return nil // gone meanwhile
	}
	if err := m.ExpireSession(st.EphemeralOwner); err != nil {
		return fmt.Errorf("propertytest: expire the holder's session: %w", err)
	}
	return nil
}
