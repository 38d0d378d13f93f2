package zklock

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// HandshakeDialer is a go-zookeeper Dialer (for zk.WithDialer) that bounds
// a connection's handshake: until the server's first reply arrives, no
// read or write deadline the client sets may lie more than bound after
// the dial. dial makes the connections (nil: net.DialTimeout).
//
// go-zookeeper v1.0.4 waits ten read timeouts, 6⅔ session timeouts, for
// the answer to its connect request. A server whose TCP port accepts but
// whose process does not answer (stopped, or in a long pause) holds the
// client that long on every try, while the rest of the ensemble elects a
// leader and serves; with the leader paused the client drops its server
// (a follower that lost the leader) and soon tries the paused one. Every
// lock request then times out for several TTLs. Bound it by the client's
// own read timeout, two thirds of the session timeout, as HandshakeBound
// does: the session outlives that wait, and a server that answers at all
// answers well within it.
func HandshakeDialer(dial zk.Dialer, bound time.Duration) zk.Dialer {
	if dial == nil {
		dial = net.DialTimeout
	}
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := dial(network, address, timeout)
		if err != nil || bound <= 0 {
			return c, err
		}
		return &handshakeConn{Conn: c, until: time.Now().Add(bound)}, nil
	}
}

// HandshakeBound is the bound HandshakeDialer should get for a session
// timeout: go-zookeeper's read timeout on an established connection.
func HandshakeBound(session time.Duration) time.Duration { return session * 2 / 3 }

// handshakeConn caps the deadlines set on a connection until its first
// read returns data: the connect response.
type handshakeConn struct {
	net.Conn
	until time.Time
	shook atomic.Bool // a read returned data
}

func (c *handshakeConn) cap(t time.Time) time.Time {
	if c.shook.Load() || t.IsZero() || t.Before(c.until) {
		return t
	}
	return c.until
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.shook.Store(true)
	}
	return n, err
}

func (c *handshakeConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.cap(t)) }

func (c *handshakeConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.cap(t)) }

func (c *handshakeConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.cap(t)) }
