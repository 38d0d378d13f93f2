package minizk_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// rawConn speaks the wire protocol by hand, byte for byte, to a minizk or
// a real ZooKeeper server: it can send what no client library would.
type rawConn struct {
	t          testing.TB
	nc         net.Conn
	connectLen int // length of the last connect response
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// enc builds a jute record.
type enc struct{ b []byte }

func (e *enc) i32(v int32) *enc { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)); return e }
func (e *enc) i64(v int64) *enc { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)); return e }
func (e *enc) str(s string) *enc {
	e.i32(int32(len(s)))
	e.b = append(e.b, s...)
	return e
}
func (e *enc) buf(p []byte) *enc {
	if p == nil {
		return e.i32(-1)
	}
	e.i32(int32(len(p)))
	e.b = append(e.b, p...)
	return e
}
func (e *enc) boolean(v bool) *enc {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
	return e
}
func (e *enc) openACL() *enc { return e.i32(1).i32(31).str("world").str("anyone") }

// writeRaw writes bytes as they are, no length prefix added.
func (c *rawConn) writeRaw(p []byte) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := c.nc.Write(p)
	return err
}

// writePacket writes body with its length prefix.
func (c *rawConn) writePacket(body []byte) error {
	return c.writeRaw(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
}

// readPacket reads one length-prefixed packet.
func (c *rawConn) readPacket() ([]byte, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var lp [4]byte
	if _, err := io.ReadFull(c.nc, lp[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lp[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("reply length %d", n)
	}
	p := make([]byte, n)
	_, err := io.ReadFull(c.nc, p)
	return p, err
}

// connectReply is a decoded connect response.
type connectReply struct {
	Timeout int32
	Session int64
	Passwd  []byte
}

// connect sends a connect request and reads the answer.
func (c *rawConn) connect(timeoutMs int32, session int64, passwd []byte, lastZxid int64) (connectReply, error) {
	if passwd == nil {
		passwd = make([]byte, 16)
	}
	body := new(enc).i32(0).i64(lastZxid).i32(timeoutMs).i64(session).buf(passwd).b
	if err := c.writePacket(body); err != nil {
		return connectReply{}, err
	}
	p, err := c.readPacket()
	if err != nil {
		return connectReply{}, err
	}
	c.connectLen = len(p)
	d := dec{b: p}
	d.i32()
	r := connectReply{Timeout: d.i32(), Session: d.i64(), Passwd: d.buf()}
	return r, d.err
}

// mustConnect opens a new session with a 10s timeout.
func (c *rawConn) mustConnect() connectReply {
	c.t.Helper()
	return c.mustConnectTimeout(10000)
}

// mustConnectTimeout opens a new session, asking for timeoutMs.
func (c *rawConn) mustConnectTimeout(timeoutMs int32) connectReply {
	c.t.Helper()
	r, err := c.connect(timeoutMs, 0, nil, 0)
	if err != nil {
		c.t.Fatalf("connect: %v", err)
	}
	return r
}

// reply is a decoded reply header and its body.
type reply struct {
	Xid  int32
	Zxid int64
	Err  int32
	Body []byte
}

// request sends one request and returns the replies up to the one with
// its xid (notifications first, in the order they came).
func (c *rawConn) request(xid, opcode int32, body []byte) ([]reply, error) {
	if err := c.writePacket(append(new(enc).i32(xid).i32(opcode).b, body...)); err != nil {
		return nil, err
	}
	var out []reply
	for {
		r, err := c.next()
		if err != nil {
			return out, err
		}
		out = append(out, r)
		if r.Xid == xid || (xid == -2 && r.Xid == -2) {
			return out, nil
		}
	}
}

// next reads one reply.
func (c *rawConn) next() (reply, error) {
	p, err := c.readPacket()
	if err != nil {
		return reply{}, err
	}
	if len(p) < 16 {
		return reply{}, fmt.Errorf("reply of %d bytes", len(p))
	}
	d := dec{b: p}
	return reply{Xid: d.i32(), Zxid: d.i64(), Err: d.i32(), Body: d.b}, nil
}

// closed reports whether the server closed the connection (a read ends
// with EOF or a reset within a second).
func (c *rawConn) closed() bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
	var b [1]byte
	_, err := c.nc.Read(b[:])
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

// dec reads a jute record.
type dec struct {
	b   []byte
	err error
}

func (d *dec) take(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		if d.err == nil {
			d.err = errors.New("short")
		}
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}
func (d *dec) i32() int32 {
	if p := d.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}
func (d *dec) i64() int64 {
	if p := d.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}
func (d *dec) boolean() bool {
	p := d.take(1)
	return p != nil && p[0] != 0
}
func (d *dec) buf() []byte {
	n := d.i32()
	if n < 0 {
		return nil
	}
	return d.take(int(n))
}
func (d *dec) str() string { return string(d.buf()) }

// rawStat is a decoded Stat record.
type rawStat struct {
	Czxid, Mzxid, Ctime, Mtime  int64
	Version, Cversion, Aversion int32
	EphemeralOwner              int64
	DataLength, NumChildren     int32
	Pzxid                       int64
}

func (d *dec) stat() rawStat {
	return rawStat{Czxid: d.i64(), Mzxid: d.i64(), Ctime: d.i64(), Mtime: d.i64(), Version: d.i32(),
		Cversion: d.i32(), Aversion: d.i32(), EphemeralOwner: d.i64(), DataLength: d.i32(),
		NumChildren: d.i32(), Pzxid: d.i64()}
}
