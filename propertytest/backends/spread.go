package backends

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/mysqlfake"
	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/internal/zkrace"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/mysqllock"
	"github.com/lockproof/lockproof/locks/zklock"
	"github.com/lockproof/lockproof/propertytest"
)

// spreadOver returns which of n servers the i-th client of a run uses:
// client i talks to server i mod n, so the clients are spread evenly over
// the servers of one deployment, in the order they were listed.
func spreadOver(i, n int) int { return i % n }

// roundRobin hands out 0, 1, … n-1, 0, … to the lockers of one run, in the
// order they are made (a crashed client's successor is a new locker).
type roundRobin struct {
	mu   sync.Mutex
	made int
}

// next returns the server index of the next locker of n servers.
func (r *roundRobin) next(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := spreadOver(r.made, n)
	r.made++
	return i
}

// ConsulLockOnAll is ConsulLockOn on several agents of one Consul
// datacenter (each a host:port of its HTTP API): the i-th locker of a run
// talks to agent i mod len(addrs), and the run's KV prefix is deleted
// through the first. Options and claims are ConsulLockOn's.
func ConsulLockOnAll(addrs []string, opts ...DeployOption) propertytest.Factory {
	cfg := newDeployConfig(opts)
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		if len(addrs) == 0 || slices.Contains(addrs, "") {
			return nil, fmt.Errorf("backends: ConsulLockOnAll needs the agents' addresses, got %q", addrs)
		}
		if err := cfg.noDialer("ConsulLockOnAll"); err != nil {
			return nil, err
		}
		prefix := "lockproof-test-" + locks.NewOwner()[:8] + "/"
		agents := make([]*consulOn, len(addrs))
		for i, a := range addrs {
			agents[i] = &consulOn{env: env, addr: a, prefix: prefix}
		}
		admin, err := agents[0].newClient(nil)
		if err != nil {
			return nil, err
		}
		env.Cleanup(func() { agents[0].deleteKeys(admin) })
		lk := cfg.links(env)
		var rr roundRobin
		clients := 0
		newClient := func() (*api.Client, error) {
			i := clients
			clients++
			return agents[rr.next(len(agents))].newClient(cfg.dialFor(lk, i))
		}
		be := newConsulBackend(newClient, consulMutex, []locks.Option{locks.WithPrefix(prefix)}, locks.MinTTL)
		be.Clock, be.Advance = locks.SystemClock{}, time.Sleep
		be.Faults = append(be.Faults, lk.faults()...)
		return be.Backend, nil
	}
}

// ZKLockOnAll is ZKLockOn on an ensemble of ZooKeeper servers (each a
// host:port): every client is given the whole ensemble, as a connection
// string with all servers is, and the i-th locker of a run connects first
// to server i mod len(addrs), moving on to the next in the list when that
// one is lost. Options and claims are ZKLockOn's.
func ZKLockOnAll(addrs []string, opts ...DeployOption) propertytest.Factory {
	cfg := newDeployConfig(opts)
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		if len(addrs) == 0 || slices.Contains(addrs, "") {
			return nil, fmt.Errorf("backends: ZKLockOnAll needs the servers' addresses, got %q", addrs)
		}
		z, err := zkfake.Start(zkfake.At(addrs[0]), zkfake.Dialer(zkDial(cfg.dial)))
		if err != nil {
			return nil, fmt.Errorf("backends: %w", err)
		}
		propertytest.CloseAtCleanup(env, "the ZooKeeper fake", z)
		lk := cfg.links(env)
		be := newZKBackend(z, zkMutex, func(i int, ttl time.Duration) (*zk.Conn, error) {
			conn, err := connectFrom(addrs, spreadOver(i, len(addrs)), ttl, zkDial(cfg.dialFor(lk, i)))
			if err == nil {
				env.Cleanup(conn.Close)
			}
			return conn, err
		})
		be.Clock, be.Advance = locks.SystemClock{}, time.Sleep
		be.Faults = append(be.Faults, lk.faults()...)
		return be.Backend, nil
	}
}

// connectFrom connects to the ensemble addrs, to addrs[first] first, with
// a session timeout of session, and waits for the session. Its connections
// are dialed by dial (nil: directly), their handshakes bounded
// (zklock.HandshakeDialer), so a paused server does not hold it for 6⅔
// session timeouts.
func connectFrom(addrs []string, first int, session time.Duration, dial zk.Dialer) (*zk.Conn, error) {
	conn, err := zkrace.Connect(addrs, session, zkTimeout, nil, zk.WithHostProvider(newInOrder(addrs, first)), zk.WithLogger(zkSilent{}),
		zk.WithDialer(zklock.HandshakeDialer(dial, zklock.HandshakeBound(session))))
	if err != nil {
		return nil, fmt.Errorf("backends: %w", err)
	}
	return conn, nil
}

// zkSilent is a go-zookeeper logger that drops its lines (every
// reconnection is logged, and the nemesis causes them by design).
type zkSilent struct{}

func (zkSilent) Printf(string, ...any) {}

// inOrder is a zk.HostProvider that tries the servers in the order the
// caller gave them, starting at first. go-zookeeper's Connect shuffles the
// list before it reaches Init, so the order is kept from before.
type inOrder struct {
	first   int
	order   []string // the servers as given, in zk.FormatServers' form
	mu      sync.Mutex
	servers []string
	cur     int
	last    int // the server of the last connection; -1 before any try
}

var _ zk.HostProvider = (*inOrder)(nil)

// newInOrder returns the host provider of a connection to addrs that
// starts at addrs[first].
func newInOrder(addrs []string, first int) *inOrder {
	return &inOrder{first: first, order: zk.FormatServers(addrs)}
}

// Init keeps the servers in the given order; the list go-zookeeper passes
// must hold the same servers.
func (p *inOrder) Init(servers []string) error {
	if len(servers) == 0 {
		return errors.New("backends: no ZooKeeper server")
	}
	if p.order != nil {
		if !slices.Equal(slices.Sorted(slices.Values(servers)), slices.Sorted(slices.Values(p.order))) {
			return fmt.Errorf("backends: ZooKeeper servers %q are not those given, %q", servers, p.order)
		}
		servers = slices.Clone(p.order)
	}
	p.servers, p.cur, p.last = servers, p.first%len(servers), -1
	return nil
}

// Len is the number of servers.
func (p *inOrder) Len() int { return len(p.servers) }

// Next returns the server to try, and whether every server was tried
// since the last connection (go-zookeeper then pauses before going on).
func (p *inOrder) Next() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == -1 {
		p.last = p.cur
		return p.servers[p.cur], false
	}
	p.cur = (p.cur + 1) % len(p.servers)
	return p.servers[p.cur], p.cur == p.last
}

// Connected makes the server just connected to the start of the next
// round.
func (p *inOrder) Connected() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = p.cur
}

// MySQLLockOnAll is MySQLLockOn on several nodes of one replicated MySQL
// deployment (each a DSN without a database, such as the nodes of a Galera
// cluster): the run's database and table are created through the first,
// and the i-th locker of a run talks to node i mod len(dsns). Every node
// is reached with its own DSN's address and credentials and the first
// DSN's other parameters. Options and claims are MySQLLockOn's.
func MySQLLockOnAll(dsns []string, opts ...DeployOption) propertytest.Factory {
	cfg := newDeployConfig(opts)
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		if len(dsns) == 0 {
			return nil, errors.New("backends: MySQLLockOnAll needs the nodes' DSNs")
		}
		if err := cfg.noDialer("MySQLLockOnAll"); err != nil {
			return nil, err
		}
		s, err := mysqlfake.Start(mysqlfake.At(dsns[0]))
		if err != nil {
			return nil, fmt.Errorf("backends: %w", err)
		}
		propertytest.CloseAtCleanup(env, "the MySQL fake", s)
		nodes, err := nodeDSNs(s.DSN(), dsns)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), mysqlTimeout)
		defer cancel()
		if err := mysqllock.CreateTable(ctx, s.DB(), mysqllock.DefaultTable); err != nil {
			return nil, fmt.Errorf("backends: %w", err)
		}
		lk := cfg.links(env)
		var rr roundRobin
		clients := 0
		be := &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				i := clients
				clients++
				db, err := openNode(env, nodes[rr.next(len(nodes))], cfg.dialFor(lk, i))
				if err != nil {
					return nil, err
				}
				own := []locks.Option{locks.WithPrefix(mysqllock.DefaultTable), locks.WithClock(locks.SystemClock{})}
				return mysqllock.New(db, name, append(own, opts...)...)
			},
			Clock:   locks.SystemClock{},
			Advance: time.Sleep,
		}
		be.Faults = lk.faults()
		return be, nil
	}
}

// nodeDSNs returns, for each of dsns, the DSN of the run's database on
// that node: base (the first node's, with the database) with the node's
// network, address and credentials.
func nodeDSNs(base string, dsns []string) ([]string, error) {
	b, err := mysql.ParseDSN(base)
	if err != nil {
		return nil, fmt.Errorf("backends: %w", err)
	}
	out := []string{base}
	for _, d := range dsns[1:] {
		c, err := mysql.ParseDSN(d)
		if err != nil {
			return nil, fmt.Errorf("backends: DSN %q: %w", d, err)
		}
		if c.DBName != "" {
			return nil, fmt.Errorf("backends: DSN %q names database %q; leave it out, the run creates its own", d, c.DBName)
		}
		n := b.Clone()
		n.Net, n.Addr, n.User, n.Passwd = c.Net, c.Addr, c.User, c.Passwd
		out = append(out, n.FormatDSN())
	}
	return out, nil
}

// openNode opens a gated pool on the node at dsn, its connections dialed
// by dial (nil: directly), closed at the end of the run, and checks that
// it answers.
func openNode(env propertytest.Env, dsn string, dial fakes.DialFunc) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("backends: %w", err)
	}
	cfg.DialFunc = dial
	connector, err := mysqlfake.GatedConnectorFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("backends: %w", err)
	}
	db := sql.OpenDB(connector)
	env.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), mysqlTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("backends: a client's pool: %w", err)
	}
	return db, nil
}
