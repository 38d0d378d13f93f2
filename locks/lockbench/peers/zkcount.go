package peers

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ZKCounter counts, over every go-zookeeper connection dialled through its
// Dial (zk.WithDialer(counter.Dial)), the requests the clients sent and the
// watch events they received. It counts at the dialer, reading the length
// prefix and header of each packet of the wire protocol as it goes by, so
// it counts what went over the wire, on minizk and on a real server alike
// (the servers are not asked). A request is every packet a client sent but
// the handshake that opens each TCP connection: pings (one every third of
// the session timeout, per connection, busy or not) count, as etcd's
// keep-alives do in EtcdCounter. A watch event is a notification packet
// (xid -1) received. Safe for concurrent use.
type ZKCounter struct {
	requests, events atomic.Int64

	mu   sync.Mutex
	byOp map[int32]int64
}

// Requests returns the requests counted so far.
func (c *ZKCounter) Requests() int64 { return c.requests.Load() }

// Events returns the watch events counted so far.
func (c *ZKCounter) Events() int64 { return c.events.Load() }

// RequestsByOpcode returns a copy of the requests counted so far by
// opcode, as the wire protocol numbers them (1 create, 2 delete, 3 exists,
// 4 getData, 8 getChildren, 11 ping, 12 getChildren2, 15 create2, 19
// createContainer, -11 closeSession).
func (c *ZKCounter) RequestsByOpcode() map[int32]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int32]int64, len(c.byOp))
	for op, n := range c.byOp {
		out[op] = n
	}
	return out
}

// Dial dials address over TCP, as go-zookeeper's default dialer does, and
// returns the connection wrapped to be counted. Its signature is
// zk.Dialer's.
func (c *ZKCounter) Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	cc := &countedConn{Conn: nc}
	cc.out = frameScanner{header: 8, on: func(n int, h []byte) {
		if n == 0 || len(h) < 8 { // the connect request has no request header
			return
		}
		c.request(int32(binary.BigEndian.Uint32(h[4:8])))
	}}
	cc.in = frameScanner{header: 4, on: func(n int, h []byte) {
		if n > 0 && len(h) == 4 && int32(binary.BigEndian.Uint32(h)) == -1 {
			c.events.Add(1)
		}
	}}
	return cc, nil
}

func (c *ZKCounter) request(op int32) {
	c.requests.Add(1)
	c.mu.Lock()
	if c.byOp == nil {
		c.byOp = map[int32]int64{}
	}
	c.byOp[op]++
	c.mu.Unlock()
}

// countedConn scans what is written and read. go-zookeeper writes from one
// goroutine and reads from one at a time, so each scanner has one user.
type countedConn struct {
	net.Conn
	out, in frameScanner
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.feed(p[:n])
	return n, err
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.feed(p[:n])
	return n, err
}

// frameScanner follows a stream of length-prefixed packets, however it is
// cut into reads or writes, and calls on with each packet's number on the
// connection (0: the handshake) and its first header bytes (fewer when the
// packet is shorter).
type frameScanner struct {
	header int // bytes of each packet's body to hand to on: at most 8
	on     func(n int, h []byte)

	buf     [12]byte
	have    int   // bytes of buf filled: the length prefix, then the header
	skip    int64 // bytes of the current packet's body left to pass over
	packets int
}

func (s *frameScanner) feed(b []byte) {
	for len(b) > 0 {
		if s.skip > 0 {
			k := int(min(s.skip, int64(len(b))))
			s.skip -= int64(k)
			b = b[k:]
			continue
		}
		need := 4
		var length int64
		if s.have >= 4 {
			length = max(0, int64(int32(binary.BigEndian.Uint32(s.buf[:4]))))
			need = 4 + int(min(length, int64(s.header)))
		}
		if s.have < need {
			k := copy(s.buf[s.have:need], b)
			s.have += k
			b = b[k:]
			if s.have < 4 || s.have < need {
				continue
			}
			if need == 4 { // the length is known now: the header may follow
				length = max(0, int64(int32(binary.BigEndian.Uint32(s.buf[:4]))))
				if length > 0 {
					continue
				}
			}
		}
		s.on(s.packets, s.buf[4:s.have])
		s.packets++
		s.skip = length - int64(s.have-4)
		s.have = 0
	}
}
