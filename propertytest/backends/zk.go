package backends

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/zklock"
	"github.com/lockproof/lockproof/propertytest"
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
func ZKLockOnOptions() propertytest.Options {
	return propertytest.Options{TTL: time.Second, Slack: time.Second, Settle: 50 * time.Millisecond}
}

// ZKLock is the Factory of zklock on minizk in manual time (zkfake.New
// with ManualTime and ForceMinizk: never a real server). Each
// Locker has a connection of its own. The default Options fit: a crashed
// holder's lease ends at its local deadline, when its node is deleted.
// Claims: the defaults, FaultCrash and FaultPause (fenced by the node's
// czxid).
//
// Every session's timeout is an hour of the manual clock, far above any
// TTL, so sessions end only by the fault below and at the end of the run.
// The clients (zkfake.Server.ConnectManual) send no wall-time pings and
// redial at once after the fault, where go-zookeeper's own clients sleep a
// second first, so a seed replays the reconnection (TestSeedReplaysExactly).
//
// It offers one fault, FaultClockJump: the holder's session is expired now,
// as after a jump of the server's clock, the one way a session ends while
// its holder still trusts its lease. The next waiter is granted the lock
// before the holder's local deadline, so zklock does not claim it, and the
// suite reports what it breaks as expected violations.
func ZKLock() propertytest.Factory { return onMinizk(zkMutex, true) }

// ZKSemaphore is the Factory of zklock.NewSemaphore of permits permits on
// minizk in manual time, as ZKLock (the same clients and sessions); run it
// with Options.Permits set to permits. Claims: the defaults, FaultCrash
// and FaultPause. It offers no backend fault.
func ZKSemaphore(permits int) propertytest.Factory {
	return onMinizk(func(conn *zk.Conn, name string, opts ...locks.Option) (locks.Locker, error) {
		return orNil(zklock.NewSemaphore(conn, name, permits, opts...))
	}, false)
}

// newZKLocker makes a Locker of zklock on conn: zklock.New, a semaphore,
// or a read-write mutex's ReadWriteLocker.
type newZKLocker func(conn *zk.Conn, name string, opts ...locks.Option) (locks.Locker, error)

// zkMutex is the newZKLocker of zklock.New.
func zkMutex(conn *zk.Conn, name string, opts ...locks.Option) (locks.Locker, error) {
	return orNil(zklock.New(conn, name, opts...))
}

// orNil returns l as a locks.Locker, or a nil one with err.
func orNil(l *zklock.Locker, err error) (locks.Locker, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// onMinizk is the Factory of ZKLock with the lockers newLocker makes; with
// expire, it offers ZKLock's fault.
func onMinizk(newLocker newZKLocker, expire bool) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		z, err := zkfake.Start(zkfake.ManualTime(epoch), zkfake.ForceMinizk(), zkfake.TickTime(zkTick))
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the ZooKeeper fake", z)
		// Before the fake closes its clients: time runs out for every lease
		// left (a TTL is at most the session timeout; the suite's are
		// seconds), so that their monitors end with them. Half a session
		// timeout, not a whole one: sessions that expired here would be
		// renewed at once by ConnectManual's clients, whose Close then
		// waits a second of wall time for the reply to its closeSession
		// (a replay's hundreds of runs, seconds each).
		env.Cleanup(func() { z.Advance(zkSession / 2) })
		be := newZKBackend(z, newLocker, func(_ int, _ time.Duration) (*zk.Conn, error) {
			return z.ConnectManual(z.Addr(), zkSession, nil)
		})
		// Every connection is in memory: the lockers' (ConnectManual to the
		// server's own address), and the fault and the clean-up act on
		// minizk directly.
		be.Clock, be.Advance, be.InProcess = z.Clock(), z.Advance, true
		if expire {
			be.Faults = []propertytest.Fault{expireHolderFault(z, be)}
		}
		return be.Backend, nil
	}
}

// ZKLockNetworkOptions are the Options to run ZKLockWithNetworkFaults
// with: TTL 1 min of the manual clock (the session timeout: go-zookeeper's
// wall-time timers must not fire within a run), OpTimeout 100 ms of wall
// time (every operation of a cut-off client waits that long), Settle 5 ms
// (requests cross a proxy), and Claims crash, pause and partition.
func ZKLockNetworkOptions() propertytest.Options {
	return propertytest.Options{TTL: zkNetTTL, OpTimeout: 100 * time.Millisecond, Settle: 5 * time.Millisecond,
		Claims: []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultPause, propertytest.FaultPartition}}
}

// zkNetTTL is ZKLockNetworkOptions' TTL, and the session timeout of
// ZKLockWithNetworkFaults' clients, which minizk grants with a tickTime of
// a twentieth of it; zkNetRequestTimeout is the request timeout of its
// lockers, in wall time: a request that no reply answers so soon is cut
// off.
const (
	zkNetTTL            = time.Minute
	zkNetRequestTimeout = 30 * time.Millisecond
)

// ZKLockWithNetworkFaults is the Factory of zklock on minizk in manual time
// with each client behind a chaos.Proxy of its own, and two FaultPartition
// faults: client 0 partitioned (its bytes held, delivered when the
// partition heals) and client 1's replies dropped (its requests take
// effect, it never hears so), besides ZKLock's FaultClockJump (not
// claimed). Run it with ZKLockNetworkOptions.
//
// Sessions are what they are on a real network: each client's session
// timeout is its TTL, and a session lives as long as the server hears from
// it. go-zookeeper's wall-time pings are dropped (ConnectManual); Advance
// pings instead, before every third of the shortest session timeout it
// moves the clock, and waits until each request is answered, held by a
// partition, or heard by minizk. So a partitioned client's session, and
// its ephemeral nodes, expire one timeout after the server last heard it.
//
// zklock claims FaultPartition: its lease is lost once no round trip has
// proved the session for TTL − locks.Drift(TTL), counted from when the
// proving request was sent, and the server expires the session no sooner
// than the session timeout (at least the TTL) after answering it. Its
// requests time out after zkNetRequestTimeout of wall time.
func ZKLockWithNetworkFaults() propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		be, _, err := newZKNetBackend(env)
		if err != nil {
			return nil, err
		}
		return be.Backend, nil
	}
}

// newZKNetBackend is ZKLockWithNetworkFaults' Backend, and its network.
func newZKNetBackend(env propertytest.Env) (*zkBackend, *zkNet, error) {
	z, err := zkfake.Start(zkfake.ManualTime(epoch), zkfake.ForceMinizk(), zkfake.TickTime(zkNetTTL/20))
	if err != nil {
		return nil, nil, err
	}
	propertytest.CloseAtCleanup(env, "the ZooKeeper fake", z)
	n := &zkNet{z: z}
	env.Cleanup(n.close)                         // after the leases' last act below, before the fake's clean-up
	env.Cleanup(func() { z.Advance(time.Hour) }) // every lease left runs out, and its monitor ends
	be := newZKBackend(z, zkMutex, n.connect, locks.WithRequestTimeout(zkNetRequestTimeout))
	be.Clock, be.Advance = z.Clock(), n.advance
	be.Faults = []propertytest.Fault{
		{Name: "partition client 0", Kind: propertytest.FaultPartition,
			Inject: n.cut(0, (*chaos.Proxy).Partition, false), Heal: n.heal(0)},
		{Name: "drop the replies to client 1", Kind: propertytest.FaultPartition,
			Inject: n.cut(1, (*chaos.Proxy).DropReplies, true), Heal: n.heal(1)},
		expireHolderFault(z, be),
	}
	return be, n, nil
}

// zkNet is the network of ZKLockWithNetworkFaults: a proxy and a
// connection per client, and which clients are cut off.
type zkNet struct {
	z *zkfake.Server

	mu      sync.Mutex
	proxies []*chaos.Proxy
	conns   []*zk.Conn
	cutOff  map[int]bool  // client i is cut off; true: its requests still reach the server
	every   time.Duration // a third of the shortest session timeout
}

// proxy returns client i's proxy, started on first use.
func (n *zkNet) proxy(i int) (*chaos.Proxy, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for len(n.proxies) <= i {
		p, err := chaos.StartProxy(n.z.Addr(), uint64(len(n.proxies))+1)
		if err != nil {
			return nil, fmt.Errorf("backends: start proxy: %w", err)
		}
		n.proxies = append(n.proxies, p)
	}
	return n.proxies[i], nil
}

// connect is client i's connection, through its proxy, with a session
// timeout of ttl.
func (n *zkNet) connect(i int, ttl time.Duration) (*zk.Conn, error) {
	p, err := n.proxy(i)
	if err != nil {
		return nil, err
	}
	c, err := n.z.ConnectManual(p.Addr(), ttl, nil)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.conns = append(n.conns, c)
	if n.every == 0 || ttl/3 < n.every {
		n.every = ttl / 3
	}
	return c, nil
}

// cut applies f to client i's proxy and marks the client cut off; reaches
// says whether its requests still reach the server (only its replies are
// lost).
func (n *zkNet) cut(i int, f func(*chaos.Proxy), reaches bool) func() error {
	return func() error {
		p, err := n.proxy(i)
		if err != nil {
			return err
		}
		n.mu.Lock()
		if n.cutOff == nil {
			n.cutOff = map[int]bool{}
		}
		n.cutOff[i] = reaches
		n.mu.Unlock()
		f(p)
		return nil
	}
}

// heal heals client i's proxy.
func (n *zkNet) heal(i int) func() error {
	return func() error {
		p, err := n.proxy(i)
		if err != nil {
			return err
		}
		p.Heal()
		n.mu.Lock()
		delete(n.cutOff, i)
		n.mu.Unlock()
		return nil
	}
}

// advance moves time by d in steps of at most a third of the shortest
// session timeout, every client pinging before each step.
func (n *zkNet) advance(d time.Duration) {
	for d > 0 {
		n.mu.Lock()
		step := d
		if n.every > 0 {
			step = min(d, n.every)
		}
		n.mu.Unlock()
		n.ping()
		n.z.Advance(step)
		d -= step
	}
}

// ping sends one request on every client's connection: what go-zookeeper's
// ping does. It waits (up to zkTimeout) for the replies of the clients not
// cut off, and until the server heard the requests of those whose replies
// are dropped: they give no other sign that their request arrived, and a
// clock that moved on before it did could expire their sessions, which no
// real network does to a client the server hears.
func (n *zkNet) ping() {
	n.mu.Lock()
	conns, cut := slices.Clone(n.conns), maps.Clone(n.cutOff)
	n.mu.Unlock()
	var waits []chan struct{}
	var unanswered []int64 // the sessions of the clients whose replies are dropped
	for i, c := range conns {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _, _ = c.Exists("/") // a lost connection shows in the lock's own requests
		}()
		// A cut-off client's request ends at the heal or the close.
		switch reaches, isCut := cut[i]; {
		case !isCut:
			waits = append(waits, done)
		case reaches:
			unanswered = append(unanswered, c.SessionID())
		}
	}
	deadline := time.NewTimer(zkTimeout)
	defer deadline.Stop()
	for _, done := range waits {
		select {
		case <-done:
		case <-deadline.C:
			return
		}
	}
	now := n.z.Clock().Now()
	for _, id := range unanswered {
		for {
			at, err := n.z.Minizk().LastHeard(id)
			if err != nil || !at.Before(now) { // gone, or heard now
				break
			}
			select {
			case <-deadline.C:
				return
			case <-time.After(50 * time.Microsecond):
			}
		}
	}
}

// close closes every client's connection, then the proxies.
func (n *zkNet) close() {
	n.mu.Lock()
	conns, proxies := n.conns, n.proxies
	n.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	for _, p := range proxies {
		_ = p.Close()
	}
}

// ZKLockOn is the Factory of zklock on the real ZooKeeper server at addr
// (host:port), under a node of its own (zkfake.New's Prefix) that is
// deleted after every run. A real server keeps its own time, so the run
// does too: Clock is the system clock and Advance sleeps. Each Locker has
// a connection of its own whose requested session timeout is its TTL: the
// server must grant it unchanged (its minSessionTimeout at most the TTL,
// its maxSessionTimeout at least), or the lease would outlive a session
// the server expires sooner. Run it with ZKLockOnOptions (TTL 1s; CI's
// server, with tickTime 200ms, grants sessions of 0.4 to 60s; ZooKeeper's
// default tickTime of 2s grants no less than 4s, so use TTL 4s there).
// Claims: the defaults. No backend fault. It chooses the server with
// zkfake.At, not through the environment.
func ZKLockOn(addr string) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		if addr == "" {
			return nil, errors.New("backends: ZKLockOn needs the server's address")
		}
		z, err := zkfake.Start(zkfake.At(addr))
		if err != nil {
			return nil, fmt.Errorf("backends: %w", err)
		}
		propertytest.CloseAtCleanup(env, "the ZooKeeper fake", z)
		be := newZKBackend(z, zkMutex, func(_ int, ttl time.Duration) (*zk.Conn, error) {
			c, _, err := z.Connect(ttl)
			return c, err
		})
		be.Clock, be.Advance = locks.SystemClock{}, time.Sleep
		return be.Backend, nil
	}
}

// zkBackend is a Backend of zklock, and the name of the lock its lockers
// were made for (the fault needs it).
type zkBackend struct {
	*propertytest.Backend
	mu   sync.Mutex
	name string
}

func (b *zkBackend) lockName() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.name
}

// newZKBackend returns a zkBackend whose i-th locker, made by newLocker,
// has a connection of its own from connect (given the locker's TTL), and the fake's options
// (prefix, clock) and extra before the suite's. On minizk it checks that the session
// timeout granted is at least the TTL. Clock and Advance are left to the
// caller.
func newZKBackend(z *zkfake.Server, newLocker newZKLocker, connect func(i int, ttl time.Duration) (*zk.Conn, error), extra ...locks.Option) *zkBackend {
	be := &zkBackend{}
	clients := 0
	be.Backend = &propertytest.Backend{
		NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
			all := slices.Concat(z.LockOptions(), extra, opts)
			o, err := locks.Resolve(zklock.DefaultPrefix, all...)
			if err != nil {
				return nil, fmt.Errorf("backends: %w", err)
			}
			conn, err := connect(clients, o.TTL)
			clients++
			if err != nil {
				return nil, err
			}
			if m := z.Minizk(); m != nil {
				granted, err := m.SessionTimeout(conn.SessionID())
				if err != nil {
					return nil, fmt.Errorf("backends: %w", err)
				}
				if granted < o.TTL {
					return nil, fmt.Errorf("backends: minizk granted a session timeout of %v, below the TTL %v", granted, o.TTL)
				}
			}
			l, err := newLocker(conn, name, all...)
			if err != nil {
				return nil, err
			}
			be.mu.Lock()
			be.name = name
			be.mu.Unlock()
			return l, nil
		},
	}
	return be
}

// expireHolderFault is the FaultClockJump of the minizk factories: the
// holder's session expired now.
func expireHolderFault(z *zkfake.Server, be *zkBackend) propertytest.Fault {
	return propertytest.Fault{
		Name: "expire the holder's session (the server's clock jumps)", Kind: propertytest.FaultClockJump,
		Inject: func() error { return expireZKHolder(z, be.lockName()) },
	}
}

// expireZKHolder expires the session of lock name's holder (the contender
// with the lowest sequence number), if any: zkfake.Server.ExpireLock,
// with nobody holding the lock (or no locker made yet) no error.
func expireZKHolder(z *zkfake.Server, name string) error {
	if z.Minizk() == nil {
		return errors.New("backends: expiring a session needs minizk")
	}
	if name == "" {
		return nil // no locker yet
	}
	ctx, cancel := context.WithTimeout(context.Background(), zkTimeout)
	defer cancel()
	err := z.ExpireLock(ctx, name)
	if err != nil && !errors.Is(err, fakes.ErrNoHolder) {
		return fmt.Errorf("backends: expire the holder's session: %w", err)
	}
	return nil
}
