package zkfake

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// The request header of ZooKeeper's wire protocol: after the length prefix,
// the xid, then the opcode. A ping is xid -2, opcode 11.
const (
	zkOpPing  = 11
	zkXidPing = -2
)

// zkManualDialer is ConnectManual's dialer: its connections drop pings and
// report each request's opcode.
type zkManualDialer struct {
	onRequest func(opcode int32)
	// inMemory, if set, dials instead of the network: minizk's
	// DialInMemory, for a client of the server's own address.
	inMemory func() (net.Conn, error)
}

func (d *zkManualDialer) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	var nc net.Conn
	var err error
	if d.inMemory != nil {
		nc, err = d.inMemory()
	} else {
		nc, err = net.DialTimeout(network, address, timeout)
	}
	if err != nil {
		return nil, err
	}
	return &zkManualConn{Conn: nc, onRequest: d.onRequest}, nil
}

// zkManualConn reads the header of each packet written. go-zookeeper writes
// each packet, length prefix included, with one Write, from one goroutine
// at a time (the handshake, then its sending loop); the first packet is
// the handshake, which has no request header.
type zkManualConn struct {
	net.Conn
	onRequest func(opcode int32)
	written   int
}

func (c *zkManualConn) Write(p []byte) (int, error) {
	c.written++
	if c.written == 1 || len(p) < 12 {
		return c.Conn.Write(p)
	}
	xid, op := int32(binary.BigEndian.Uint32(p[4:8])), int32(binary.BigEndian.Uint32(p[8:12]))
	if c.onRequest != nil {
		c.onRequest(op)
	}
	if xid == zkXidPing && op == zkOpPing {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// zkRedialer is ConnectManual's zk.HostProvider, of one server: it lets
// go-zookeeper dial again at once twice after a connection with a session,
// and asks for its one-second pause (retryStart) only from the third dial
// on.
type zkRedialer struct {
	mu     sync.Mutex
	server string
	dials  int // since the last connection that had a session
}

var _ zk.HostProvider = (*zkRedialer)(nil)

// Init takes the one server.
func (h *zkRedialer) Init(servers []string) error {
	if len(servers) != 1 {
		return fmt.Errorf("zkfake: one zookeeper server, got %v", servers)
	}
	h.server = servers[0]
	return nil
}

// Len is 1.
func (h *zkRedialer) Len() int { return 1 }

// Next returns the server, and retryStart from the third dial without a
// session on.
func (h *zkRedialer) Next() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dials++
	return h.server, h.dials > 2
}

// Connected counts the dials afresh.
func (h *zkRedialer) Connected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dials = 0
}
