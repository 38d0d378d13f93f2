package fakes

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/consul/api"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// Severable connections, and the dialers of each server for clients that
// a library builds by itself.
//
// Every server has DialContext, a DialFunc that reaches it as the fake's
// own clients do (in memory on miniredis, miniconsul, the in-process MySQL
// and minizk; TCP to a real server and to embedded etcd), whatever address
// a library was told. Conns.Dial wraps any DialFunc so that Sever can cut
// what it dialed, as a crashed process's connections are cut; and each
// server makes clients whose connections go through a Conns, gated as its
// other clients are: RedisServer.NewClientThrough,
// ConsulServer.NewClientThrough, MySQLServer.OpenDBThrough,
// EtcdServer.NewClientThrough and ZooKeeperServer.ConnectThrough (not
// gated: go-zookeeper's requests carry no context).

// DialFunc dials a connection: the shape of net.Dialer.DialContext, of
// go-redis's Options.Dialer, http.Transport.DialContext and
// go-sql-driver's Config.DialFunc.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// ErrSevered is the cause of every dial through a Conns after its Sever
// (wrapped in a *net.OpError, so that clients take it for a network
// failure): a crashed process dials nothing.
var ErrSevered = errors.New("fakes: the client's connections were severed (its process crashed), so it dials nothing")

// Conns tracks the connections dialed through it (Dial) so that Sever can
// close them all at once, as a crashed process's connections end, and
// refuse every later dial: a client's keep-alives and retries then fail
// as they would after a real crash. It works for in-memory connections
// and TCP alike. Safe for concurrent use; the zero value is not usable,
// make one with NewConns.
type Conns struct {
	mu      sync.Mutex
	open    map[*trackedConn]struct{}
	severed bool
}

// NewConns returns a Conns that tracks no connection yet.
func NewConns() *Conns { return &Conns{open: map[*trackedConn]struct{}{}} }

// Dial returns dial with every connection it makes tracked by c; after
// Sever it fails at once with an error wrapping ErrSevered. A nil dial
// gives a DialFunc that fails, saying so.
func (c *Conns) Dial(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dial == nil {
			return nil, errors.New("fakes: Conns.Dial was given a nil dial function")
		}
		if c.Severed() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: ErrSevered}
		}
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		t := &trackedConn{Conn: conn, owner: c}
		c.mu.Lock()
		severed := c.severed
		if !severed {
			c.open[t] = struct{}{}
		}
		c.mu.Unlock()
		if severed { // Sever ran while this dial was on its way
			_ = conn.Close()
			return nil, &net.OpError{Op: "dial", Net: network, Err: ErrSevered}
		}
		return t, nil
	}
}

// Sever closes every connection dialed through c and still open, and
// makes every later dial fail with ErrSevered. Later calls do nothing.
func (c *Conns) Sever() {
	c.mu.Lock()
	c.severed = true
	open := c.open
	c.open = map[*trackedConn]struct{}{}
	c.mu.Unlock()
	for t := range open {
		_ = t.Conn.Close()
	}
}

// Severed reports whether Sever was called.
func (c *Conns) Severed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.severed
}

// Open returns the number of connections dialed through c and not yet
// closed (nor severed).
func (c *Conns) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open)
}

// trackedConn is a connection of a Conns: closing it forgets it.
type trackedConn struct {
	net.Conn
	owner *Conns
}

// Close closes the connection and stops tracking it.
func (t *trackedConn) Close() error {
	t.owner.mu.Lock()
	delete(t.owner.open, t)
	t.owner.mu.Unlock()
	return t.Conn.Close()
}

// dialTCP dials addr over TCP, for the real servers.
func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// DialContext connects to the server, whatever network and addr say, as
// the fake's own clients do: in memory on miniredis (a stopped server
// refuses, as a closed port), TCP to Addr on a real server. Hand it to a
// library that builds its go-redis client from an address (its Dialer),
// through Conns.Dial to make its connections severable.
func (r *RedisServer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if r.mini != nil {
		return r.dialInMemory(ctx, network, addr)
	}
	return dialTCP(ctx, r.addr)
}

// NewClientThrough is NewClient with every connection dialed through
// conns (DialContext wrapped by conns.Dial): after conns.Sever its
// commands fail and it cannot reconnect. Gated as NewClient's, closed by
// Close.
func (r *RedisServer) NewClientThrough(conns *Conns) *redis.Client {
	opts := r.clientOptions()
	opts.Dialer = conns.Dial(r.DialContext)
	c := redis.NewClient(opts)
	GateRedis(c, r.GateLabel())
	return r.keep(c)
}

// DialContext connects to the server, whatever network and addr say, as
// the fake's own clients do: in memory on miniconsul
// (miniconsul.Server.DialInMemory), TCP to Addr on a real agent. Hand it
// to an http.Transport (DialContext) of a client a library builds, and
// gate that transport with GateConsulTransport.
func (c *ConsulServer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.mini != nil {
		return c.mini.DialInMemory(ctx, network, addr)
	}
	return dialTCP(ctx, c.addr)
}

// NewClientThrough is NewClient with every connection dialed through
// conns: after conns.Sever its requests fail and it cannot reconnect.
// Gated as NewClient's; its idle connections are closed by Close.
func (c *ConsulServer) NewClientThrough(conns *Conns) *api.Client {
	c.helper()
	client, err := c.newClientDialing(conns.Dial(c.DialContext))
	if err != nil {
		c.fatalf("fakes: %v", err)
	}
	return client
}

// DialContext connects to the server, whatever network and addr say, as
// the pools of OpenDB do: in memory on the in-process server, to the
// DSN's address on a real one. It fits go-sql-driver's Config.DialFunc
// (and mysql.RegisterDialContext, with the address dropped).
func (s *MySQLServer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.mem != nil {
		return s.mem.Dial(ctx, network, addr)
	}
	cfg, err := mysql.ParseDSN(s.dsn)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, cfg.Net, cfg.Addr)
}

// OpenDBThrough is OpenDB with every connection dialed through conns:
// after conns.Sever its statements fail and it cannot reconnect. Gated
// as OpenDB's (GatedMySQLConnector), closed by Close.
func (s *MySQLServer) OpenDBThrough(conns *Conns) (*sql.DB, error) {
	return s.openDB(conns.Dial(s.DialContext))
}

// DialContext connects to the server, whatever network and addr say: in
// memory on minizk (minizk.Server.DialInMemory), TCP to Addr on a real
// server. go-zookeeper takes a dialer of another shape: see
// ConnectThrough, or adapt it in zk.WithDialer.
func (z *ZooKeeperServer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if z.mini != nil {
		return z.mini.DialInMemory()
	}
	return dialTCP(ctx, z.addr)
}

// ConnectThrough is Connect with every connection dialed through conns
// (DialContext, within go-zookeeper's connect timeout): after conns.Sever
// the client loses its connection and cannot reconnect, so its session
// expires on the server as a crashed process's does. Like Connect's, its
// requests are not gated.
func (z *ZooKeeperServer) ConnectThrough(conns *Conns, sessionTimeout time.Duration) (*zk.Conn, <-chan zk.Event, error) {
	dial := conns.Dial(z.DialContext)
	return z.connect(z.addr, sessionTimeout, zk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return dial(ctx, network, address)
	}))
}

// DialContext connects over TCP to addr, which must be the host:port of
// one of the server's endpoints (Endpoints; the embedded members listen
// on loopback TCP), as gRPC asks for each endpoint. Wrapped by Conns.Dial
// and adapted to grpc.WithContextDialer, it makes a client's connections
// severable; see NewClientThrough.
func (s *EtcdServer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	for _, ep := range s.Endpoints() {
		host := ep
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			host = u.Host
		}
		if host == addr {
			return dialTCP(ctx, addr)
		}
	}
	return nil, fmt.Errorf("fakes: %q is not an endpoint of the etcd server %v", addr, s.Endpoints())
}

// NewClientThrough is NewClient with every connection dialed through
// conns: after conns.Sever its requests and its leases' keep-alives fail
// and it cannot reconnect. Gated as NewClient's, closed by Close.
func (s *EtcdServer) NewClientThrough(conns *Conns, dialOpts ...grpc.DialOption) *clientv3.Client {
	dial := conns.Dial(s.DialContext)
	withDialer := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return dial(ctx, "tcp", addr)
	})
	return s.NewClient(append([]grpc.DialOption{withDialer}, dialOpts...)...)
}
