package fakes

import (
	"context"
	"errors"
	"net"
	"sync"
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
