package minizk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
)

// conn is one client connection: a goroutine reads and processes packets
// one at a time, another writes what the server queued for it, in order.
type conn struct {
	s  *Server
	nc net.Conn

	sess *session   // guarded by s.mu; nil before the handshake
	ids  []identity // guarded by s.mu: its address, the credentials added

	recv, sent atomic.Int64 // packets read and written

	outMu   sync.Mutex
	out     [][]byte
	closing bool          // close the connection once out is written
	wake    chan struct{} // cap 1: out has something
	done    chan struct{} // closed by kill
	once    sync.Once
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if id, ok := ipOf(nc.RemoteAddr()); ok {
		c.ids = []identity{id}
	}
	return c
}

// kill closes the connection now; what is queued is dropped.
func (c *conn) kill() {
	c.once.Do(func() {
		close(c.done)
		_ = c.nc.Close()
	})
}

// send queues a packet (its length prefix added here).
func (c *conn) send(body []byte) {
	pkt := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	c.sendRaw(append(pkt, body...))
}

// sendRaw queues bytes to write as they are.
func (c *conn) sendRaw(b []byte) {
	c.outMu.Lock()
	c.out = append(c.out, b)
	c.outMu.Unlock()
	c.signal()
}

// finish closes the connection once everything queued is written.
func (c *conn) finish() {
	c.outMu.Lock()
	c.closing = true
	c.outMu.Unlock()
	c.signal()
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) writeLoop() {
	defer c.s.wg.Done()
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.outMu.Lock()
		out, closing := c.out, c.closing
		c.out = nil
		c.outMu.Unlock()
		for _, p := range out {
			if _, err := c.nc.Write(p); err != nil {
				c.kill()
				return
			}
			c.sent.Add(1)
		}
		if closing {
			c.kill()
			return
		}
	}
}

// readPacket reads one length-prefixed packet. A length below 1 or above
// maxPacket is an error: ZooKeeper closes such a connection.
func (c *conn) readPacket() ([]byte, error) {
	var lp [4]byte
	if _, err := io.ReadFull(c.nc, lp[:]); err != nil {
		return nil, err
	}
	return c.readBody(lp)
}

// readBody reads the packet whose length prefix is lp.
func (c *conn) readBody(lp [4]byte) ([]byte, error) {
	n := int32(binary.BigEndian.Uint32(lp[:]))
	if n < 1 || n > maxPacket {
		return nil, errBadLength
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(c.nc, p); err != nil {
		return nil, err
	}
	c.recv.Add(1)
	return p, nil
}

// counts returns the packets read and written so far.
func (c *conn) counts() (recv, sent int64) { return c.recv.Load(), c.sent.Load() }

var errBadLength = errors.New("minizk: packet length out of range")

func (c *conn) readLoop() {
	defer c.s.wg.Done()
	defer c.detach()
	defer c.kill()
	var lp [4]byte
	if _, err := io.ReadFull(c.nc, lp[:]); err != nil {
		return
	}
	if answer, ok := fourLetterAnswer(c.s, string(lp[:])); ok {
		// A four-letter word instead of a connect request: answered
		// even while paused (ZooKeeper answers them on the network
		// thread), then the connection is closed.
		c.sendRaw([]byte(answer))
		c.finish()
		<-c.done
		return
	}
	p, err := c.readBody(lp)
	if err != nil || !c.s.waitRunning(c.done) {
		return
	}
	if !c.handshake(p) {
		<-c.done // the writer closes the connection after the answer
		return
	}
	for {
		p, err := c.readPacket()
		if err != nil || !c.s.waitRunning(c.done) {
			return
		}
		if !c.handle(p) {
			<-c.done // the writer closes the connection after the last reply
			return
		}
	}
}

// detach forgets the connection: its watches go, its session (if still
// attached to it) is left without one.
func (c *conn) detach() {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.conns[c]; ok {
		r, w := c.counts()
		s.recvGone += r
		s.sentGone += w
	}
	delete(s.conns, c)
	for _, m := range []map[string]map[*conn]struct{}{s.dataW, s.childW} {
		for p, w := range m {
			delete(w, c)
			if len(w) == 0 {
				delete(m, p)
			}
		}
	}
	if c.sess != nil && c.sess.conn == c {
		c.sess.conn = nil
	}
	s.changedLocked()
}

// handshake answers the connect request p. It reports false if the
// connection is to be closed (after the answer, if there is one).
func (c *conn) handshake(p []byte) bool {
	req, err := decodeConnect(p)
	if err != nil {
		return c.closeNow()
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return c.closeNow()
	}
	s.expireDueLocked()
	if req.lastZxidSeen > s.st.zxid {
		return c.closeNow() // ZooKeeper refuses a client ahead of it, without a word
	}
	timeout := s.negotiate(req.timeout)
	var sess *session
	if req.sessionID == 0 {
		sess = s.newSessionLocked(timeout)
	} else {
		sess = s.sessions[req.sessionID]
		if sess == nil || !bytes.Equal(sess.passwd, req.passwd) {
			// Expired, unknown or wrong password: timeout 0, session 0.
			c.send(connectResponse(0, 0, make([]byte, 16), req.readOnlySent))
			c.finish()
			return false
		}
		if sess.conn != nil {
			sess.conn.kill()
		}
		sess.timeout = timeout
		s.touchLocked(sess)
		s.armLocked(sess, timeout)
	}
	sess.conn = c
	c.sess = sess
	s.changedLocked()
	c.send(connectResponse(int32(timeout.Milliseconds()), sess.id, sess.passwd, req.readOnlySent))
	return true
}

// connectResponse encodes the answer to a connect request; the read-only
// flag ends it only if the client sent one (ZooKeeper does the same, for
// old clients).
func connectResponse(timeoutMs int32, id int64, passwd []byte, readOnly bool) []byte {
	var w writer
	w.int32(0) // protocol version
	w.int32(timeoutMs)
	w.int64(id)
	w.buffer(passwd)
	if readOnly {
		w.bool(false) // this server is never read-only
	}
	return w.b
}

// replyHeader encodes a reply header.
func replyHeader(xid int32, zxid int64, code Code) *writer {
	w := &writer{}
	w.int32(xid)
	w.int64(zxid)
	w.int32(int32(code))
	return w
}

// handle processes one request packet. It reports false if the connection
// is to be closed once the replies queued are written.
func (c *conn) handle(p []byte) bool {
	r := reader{b: p}
	h := header{xid: r.int32(), opcode: r.int32()}
	if r.err != nil {
		return c.closeNow()
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireDueLocked()
	if s.closed || c.sess == nil || s.sessions[c.sess.id] != c.sess || c.sess.conn != c {
		return c.closeNow() // the session ended under this connection
	}
	s.touchLocked(c.sess)
	o, known, err := decodeOp(h.opcode, r.b)
	switch {
	case !known:
		if validOpcode(h.opcode) {
			c.send(replyHeader(h.xid, s.st.zxid, CodeUnimplemented).b)
			return true
		}
		// ZooKeeper's UnimplementedRequestProcessor: the error (zxid -1),
		// then the connection is closed.
		c.send(replyHeader(h.xid, -1, CodeUnimplemented).b)
		c.finish()
		return false
	case err != nil:
		if isWrite(h.opcode) {
			s.st.zxid++ // the failed transaction still takes its zxid
		}
		c.send(replyHeader(h.xid, s.st.zxid, CodeMarshallingError).b)
		return true
	}
	return c.dispatch(h, o)
}

// closeNow makes handle's caller close the connection without an answer.
func (c *conn) closeNow() bool {
	c.finish()
	return false
}

// validOpcode reports whether ZooKeeper 3.8 knows the opcode, though
// minizk does not serve it (deleteContainer, TTL nodes, persistent watches,
// reconfig, multiRead, ...): those get UNIMPLEMENTED and the connection
// stays open.
func validOpcode(code int32) bool {
	switch code {
	case opNotification, opReconfig, opCheckWatches, opRemoveWatches, opDeleteContainer,
		opMultiRead, opSASL, opGetEphemerals, opGetAllChildren, opSetWatches2, opAddWatch, opWhoAmI:
		return true
	}
	return false
}

// isWrite reports whether the opcode is a transaction (it takes a zxid).
func isWrite(code int32) bool {
	switch code {
	case opCreate, opCreate2, opCreateContainer, opCreateTTL, opDelete, opSetData, opSetACL, opMulti, opCheck, opCloseSession:
		return true
	}
	return false
}

func sortedIDs(m map[int64]*session) []int64 {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
