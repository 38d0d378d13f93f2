package zklock

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/internal/zkrace"
	"github.com/lockproof/lockproof/locks"
)

// testTimeout bounds a test's waits for the server.
const testTimeout = locktest.LockTimeout

// sessionTimeout is the session timeout of the tests' connections, and so
// the TTL of their locks. The test server must grant it (its
// maxSessionTimeout at least this, its minSessionTimeout at most this).
const sessionTimeout = 4 * time.Second

// zkServer is the ZooKeeper server of one test and a prefix of the test's
// own under which its locks live.
type zkServer struct {
	addr   string
	prefix string
}

// server returns the test's ZooKeeper server: zkfake.New, which is
// minizk in real time with a 200 ms tick (sessions of 0.4 to 4 s), or the
// real server at LOCKPROOF_ZK_ADDR (host:port). A real server must grant
// the tests' session timeouts: one with tickTime=200, minSessionTimeout=400
// and maxSessionTimeout=60000 does (CI's); with ZooKeeper's defaults
// (tickTime=2000: sessions of 4 to 40 s) they pass too,
// TestNetworkCutEndsLeaseBeforeExpiry more slowly (its 1.5 s session is
// granted as 4 s, which only delays the waiter).
func server(t testing.TB) *zkServer {
	t.Helper()
	z := zkfake.New(t, zkfake.TickTime(200*time.Millisecond))
	s := &zkServer{addr: z.Addr(), prefix: z.Prefix() + "/" + strings.NewReplacer("/", "_").Replace(t.Name())}
	t.Cleanup(func() { s.removeAll(t) })
	return s
}

// quiet discards go-zookeeper's log lines.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// connOpts are the settings of one test connection: a faultDialer to
// dial through, a callback for every event the connection sees.
type connOpts struct {
	dialer  *faultDialer
	events  func(zk.Event)
	timeout time.Duration // the session timeout; 0 means sessionTimeout
}

// connect opens a connection with the test session timeout, waits for its
// session, and closes it when the test ends.
func (s *zkServer) connect(t testing.TB) *zk.Conn {
	t.Helper()
	return s.connectWith(t, connOpts{})
}

func (s *zkServer) connectWith(t testing.TB, o connOpts) *zk.Conn {
	t.Helper()
	dial := zk.Dialer(net.DialTimeout)
	if o.dialer != nil {
		dial = o.dialer.dial
	}
	timeout := cmp.Or(o.timeout, sessionTimeout)
	conn, events, err := zk.Connect([]string{s.addr}, timeout,
		zk.WithLogger(quiet{}), zk.WithDialer(dial), zk.WithEventCallback(o.events))
	if err != nil {
		t.Fatalf("connect to ZooKeeper at %s: %v", s.addr, err)
	}
	t.Cleanup(conn.Close)
	give := time.After(testTimeout)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				zkrace.Settle(testTimeout)
				return conn
			}
		case <-give:
			t.Fatalf("no ZooKeeper session from %s within %v (is the server up?)", s.addr, testTimeout)
		}
	}
}

// removeAll deletes the test's prefix and everything under it.
func (s *zkServer) removeAll(t testing.TB) {
	conn, _, err := zk.Connect([]string{s.addr}, sessionTimeout, zk.WithLogger(quiet{}))
	if err != nil {
		return
	}
	defer conn.Close()
	var rm func(p string)
	rm = func(p string) {
		kids, _, err := conn.Children(p)
		if err != nil {
			return
		}
		for _, k := range kids {
			rm(p + "/" + k)
		}
		_ = conn.Delete(p, -1)
	}
	rm(s.prefix)
}

// newLocker returns the lock name on conn under the test's prefix, with
// TTL the session timeout.
func (s *zkServer) newLocker(t testing.TB, conn *zk.Conn, name string, opts ...locks.Option) *Locker {
	t.Helper()
	all := []locks.Option{locks.WithTTL(sessionTimeout), locks.WithPrefix(s.prefix)}
	l, err := New(conn, name, append(all, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// children returns the lock's children (none when its node is missing).
func children(t testing.TB, conn *zk.Conn, l *Locker) []string {
	t.Helper()
	kids, _, err := conn.Children(l.NodePath())
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("list %s: %v", l.NodePath(), err)
	}
	return kids
}

// waitChildren blocks until the lock has exactly n children, woken by a
// child watch: no polling.
func waitChildren(t testing.TB, conn *zk.Conn, l *Locker, n int) []string {
	t.Helper()
	timeout := time.After(testTimeout)
	for {
		kids, _, ch, err := conn.ChildrenW(l.NodePath())
		if errors.Is(err, zk.ErrNoNode) {
			var ok bool
			if ok, _, ch, err = conn.ExistsW(l.NodePath()); ok {
				continue
			}
		}
		if err != nil {
			t.Fatalf("watch %s: %v", l.NodePath(), err)
		}
		if len(kids) == n {
			return kids
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("timed out waiting for %d children of %s; have %v", n, l.NodePath(), kids)
		}
	}
}

// faultDialer dials the server for go-zookeeper (zk.WithDialer) through
// connections it can fail: drop one at the reply to the next create of a
// contender's node (the reply is lost, the create applied), or cut the
// network (blackhole: nothing goes through either way, dials fail). It
// also records the session's password from the connect reply, which
// killSession needs.
type faultDialer struct {
	mu        sync.Mutex
	dropReply bool // armed: drop the connection at the next contender create's reply
	dropped   int
	cut       chan struct{} // closed while the network is up; nil when never cut
	session   int64
	passwd    []byte
	last      *faultConn    // the connection dialled last
	lostDel   chan struct{} // signalled (if not nil) as a delete is lost in a cut
	mute      bool          // replies are read and thrown away; requests go through
}

// muteReplies makes every connection, open or dialled later, throw away
// what the server sends (on), or stop doing so: requests still reach the
// server and take effect, the client hears nothing, not even the reply to
// its handshake.
func (d *faultDialer) muteReplies(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mute = on
}

func (d *faultDialer) muted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mute
}

// opDelete is ZooKeeper's opcode of delete.
const opDelete = 2

// watchLostDeletes returns a channel that receives once for every delete
// request lost in a cut of the network from now on.
func (d *faultDialer) watchLostDeletes() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lostDel = make(chan struct{}, 16)
	return d.lostDel
}

func (d *faultDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if d.isCut() {
		return nil, errors.New("faultDialer: network cut")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	fc := &faultConn{Conn: c, d: d, first: true}
	d.mu.Lock()
	d.last = fc
	d.mu.Unlock()
	return fc, nil
}

// reset closes the connection dialled last, as a peer's reset would:
// go-zookeeper fails the requests it sent on it with
// zk.ErrConnectionClosed and dials again (through the network, if it is
// not cut).
func (d *faultDialer) reset() {
	d.mu.Lock()
	last := d.last
	d.mu.Unlock()
	if last != nil {
		last.Conn.Close()
	}
}

// armDrop makes the connection drop at the reply to the next create of a
// contender's node.
func (d *faultDialer) armDrop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dropReply = true
}

func (d *faultDialer) drops() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

// setCut cuts the network (true) or heals it.
func (d *faultDialer) setCut(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case on && (d.cut == nil || isClosed(d.cut)):
		d.cut = make(chan struct{})
	case !on && d.cut != nil && !isClosed(d.cut):
		close(d.cut)
	}
}

func (d *faultDialer) isCut() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cut != nil && !isClosed(d.cut)
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (d *faultDialer) credentials() (int64, []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.session, d.passwd
}

type faultConn struct {
	net.Conn
	d     *faultDialer
	first bool // the next body read is the connect reply

	mu      sync.Mutex
	dropXid []byte // the xid of the create whose reply drops the connection
	dead    bool   // the network was cut under it: it stays silent for good
}

// silent reports whether the connection is cut off: the network is cut,
// or was while it was open (its byte stream is broken for good).
func (c *faultConn) silent() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead && c.d.isCut() {
		c.dead = true
	}
	return c.dead
}

// opCreate is ZooKeeper's opcode of create.
const opCreate = 1

func (c *faultConn) Write(b []byte) (int, error) {
	if c.silent() {
		if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[8:12])) == opDelete {
			c.d.mu.Lock()
			if c.d.lostDel != nil {
				select {
				case c.d.lostDel <- struct{}{}:
				default:
				}
			}
			c.d.mu.Unlock()
		}
		return len(b), nil // lost on the way
	}
	// A request is [length][xid][opcode][path ...], written whole.
	if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[8:12])) == opCreate && bytes.Contains(b, []byte("-"+lockMarker)) {
		c.d.mu.Lock()
		if c.d.dropReply {
			c.d.dropReply = false
			c.mu.Lock()
			c.dropXid = bytes.Clone(b[4:8])
			c.mu.Unlock()
		}
		c.d.mu.Unlock()
	}
	return c.Conn.Write(b)
}

func (c *faultConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if err == nil && c.d.muted() {
			continue // thrown away
		}
		if c.silent() {
			if err != nil {
				return n, err // go-zookeeper's read deadline: the connection is found dead
			}
			continue // lost on the way
		}
		// go-zookeeper reads a packet's length, then its body, which for a
		// reply starts with the request's xid.
		c.mu.Lock()
		drop := c.dropXid != nil && len(b) > 4 && n >= 4 && bytes.Equal(b[:4], c.dropXid)
		c.mu.Unlock()
		if drop {
			c.d.mu.Lock()
			c.d.dropped++
			c.d.mu.Unlock()
			c.Conn.Close()
			return 0, io.ErrUnexpectedEOF
		}
		if c.first && len(b) > 4 && n >= 20 && err == nil {
			// The connect reply: protocol version, timeout, session id,
			// password (length and bytes).
			c.first = false
			if l := int(binary.BigEndian.Uint32(b[16:20])); n >= 20+l {
				c.d.mu.Lock()
				c.d.session = int64(binary.BigEndian.Uint64(b[8:16]))
				c.d.passwd = bytes.Clone(b[20 : 20+l])
				c.d.mu.Unlock()
			}
		}
		return n, err
	}
}

// killSession closes the session (id, passwd) on the server as its owner
// would: a connection of its own attaches to the session, then sends
// closeSession. The server deletes the session's ephemeral nodes and tells
// the session's connection it expired.
func killSession(t testing.TB, addr string, id int64, passwd []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(testTimeout))
	send := func(parts ...any) []byte {
		var body bytes.Buffer
		for _, p := range parts {
			_ = binary.Write(&body, binary.BigEndian, p)
		}
		msg := binary.BigEndian.AppendUint32(nil, uint32(body.Len())) // length, then body
		if _, err := c.Write(append(msg, body.Bytes()...)); err != nil {
			t.Fatalf("killSession: write: %v", err)
		}
		var n [4]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			t.Fatalf("killSession: read: %v", err)
		}
		reply := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(c, reply); err != nil {
			t.Fatalf("killSession: read: %v", err)
		}
		return reply
	}
	// Connect: protocol version, last zxid seen, timeout (ms), session id, password.
	reply := send(int32(0), int64(0), int32(sessionTimeout/time.Millisecond), id, int32(len(passwd)), passwd)
	if len(reply) < 16 || int64(binary.BigEndian.Uint64(reply[8:16])) != id {
		t.Fatalf("killSession: the server did not attach session %x", id)
	}
	// closeSession: xid, opcode -11.
	send(int32(1), int32(-11))
}

// skipReconnectsUnderRace skips a test that makes a connection reconnect
// (through a faultDialer: a cut, a reset, an expired session) under the
// race detector. go-zookeeper v1.0.4 races with itself when a connection
// that has watches reconnects with a request pending: its receive loop
// writes Conn.lastZxid for the request's reply while the connection's loop
// reads it in sendSetWatches, and the detector reports the library (CI saw
// it in TestCleanUpLostWithTheConnectionIsSentAgain). The tests still run
// without -race: in go test ./..., and in CI's step 9 on real servers.
func skipReconnectsUnderRace(t *testing.T) {
	if zkrace.Enabled {
		t.Skip("go-zookeeper v1.0.4 races on Conn.lastZxid when a connection with watches reconnects, as this test makes it")
	}
}
