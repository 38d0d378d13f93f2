package minizk

import (
	"context"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/lockproof/lockproof/fakes/internal/anyclock"
)

// session is a client session: it outlives its connections until it is
// closed or expires.
type session struct {
	id        int64
	passwd    []byte
	timeout   time.Duration
	lastHeard time.Time
	timer     Timer
	conn      *conn // the connection it is attached to, or nil
}

func (sess *session) stopTimer() {
	if sess.timer != nil {
		sess.timer.Stop()
		sess.timer = nil
	}
}

// negotiate clamps a requested session timeout (ms) to [2, 20] ticks, as
// ZooKeeper's default minSessionTimeout and maxSessionTimeout do.
func (s *Server) negotiate(ms int32) time.Duration {
	d := time.Duration(ms) * time.Millisecond
	lo, hi := 2*s.cfg.tick, 20*s.cfg.tick
	switch {
	case d < lo:
		return lo
	case d > hi:
		return hi
	}
	return d
}

// newSessionLocked creates a session (a transaction: it takes a zxid).
func (s *Server) newSessionLocked(timeout time.Duration) *session {
	s.nextSID++
	id := s.nextSID
	s.st.zxid++
	sess := &session{id: id, passwd: sessionPassword(id), timeout: timeout}
	s.sessions[id] = sess
	s.touchLocked(sess)
	s.armLocked(sess, timeout)
	s.changedLocked()
	return sess
}

// touchLocked records that a packet of sess arrived now.
func (s *Server) touchLocked(sess *session) { sess.lastHeard = s.cfg.clock.Now() }

// armLocked arms sess's expiry check d from now.
func (s *Server) armLocked(sess *session, d time.Duration) {
	sess.stopTimer()
	sess.timer = s.cfg.clock.AfterFunc(d, func() { s.checkExpiry(sess) })
}

// checkExpiry runs when sess's timer fires: it expires sess if nothing was
// heard from it for its timeout, else re-arms for the rest.
func (s *Server) checkExpiry(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.sessions[sess.id] != sess {
		return
	}
	if left := s.leftLocked(sess); left > 0 {
		s.armLocked(sess, left)
		return
	}
	s.closeSessionLocked(sess, true)
}

// leftLocked is how long sess has before it expires.
func (s *Server) leftLocked(sess *session) time.Duration {
	return sess.lastHeard.Add(sess.timeout).Sub(s.cfg.clock.Now())
}

// expireDueLocked expires every session whose timeout has passed, so that
// a request or a control right after the clock moved sees them gone
// whether or not their timers have run yet.
func (s *Server) expireDueLocked() {
	for _, sess := range s.sessionsSorted() {
		if s.leftLocked(sess) <= 0 {
			s.closeSessionLocked(sess, true)
		}
	}
}

// closeSessionLocked ends sess, as a closeSession transaction: a zxid, its
// ephemerals deleted (their watches fire), its connection closed. With
// kill, the connection is closed at once (an expiry); otherwise the caller
// answers the close request first.
func (s *Server) closeSessionLocked(sess *session, kill bool) {
	sess.stopTimer()
	delete(s.sessions, sess.id)
	s.st.zxid++
	x := &txn{t: s.st, zxid: s.st.zxid, now: s.now(), sess: sess.id}
	for _, p := range s.st.ephemeralsOf(sess.id) {
		x.deleteNode(p)
	}
	s.fireLocked(x.events)
	if kill && sess.conn != nil {
		sess.conn.kill()
	}
	s.changedLocked()
}

func (s *Server) sessionsSorted() []*session {
	out := make([]*session, 0, len(s.sessions))
	for _, id := range sortedIDs(s.sessions) {
		out = append(out, s.sessions[id])
	}
	return out
}

// ExpireSession expires session id now, as its timeout would: its
// ephemerals are deleted, their watches fire, its connection is closed, and
// the client learns of the expiry when it reconnects.
func (s *Server) ExpireSession(id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	sess := s.sessions[id]
	if sess == nil {
		return fmt.Errorf("%w: %#x", ErrNoSession, id)
	}
	s.closeSessionLocked(sess, true)
	return nil
}

// DropConnections closes every client connection. Sessions live on: a
// client that reconnects within its session timeout keeps its session, its
// ephemerals and (re-registered by the client) its watches.
func (s *Server) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(0)
}

// DropSession closes the connection of session id, leaving the session.
func (s *Server) DropSession(id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[id]
	if sess == nil {
		return fmt.Errorf("%w: %#x", ErrNoSession, id)
	}
	if sess.conn != nil {
		sess.conn.kill()
	}
	return nil
}

// dropLocked closes every connection (sid 0) or those of session sid.
func (s *Server) dropLocked(sid int64) {
	for c := range s.conns {
		if sid == 0 || (c.sess != nil && c.sess.id == sid) {
			c.kill()
		}
	}
}

// Pause makes the server stop answering: connections stay open and
// packets are read but not processed until Resume. Session expiry goes on
// (nothing is heard from a client while paused), as on a stalled server
// whose session tracker still runs.
func (s *Server) Pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.paused && !s.closed {
		s.paused = true
		s.resumed = make(chan struct{})
	}
}

// Resume ends a Pause: the packets read meanwhile are processed in order.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused {
		s.paused = false
		close(s.resumed)
	}
}

// waitRunning blocks while the server is paused; it reports false if
// done is closed first.
func (s *Server) waitRunning(done <-chan struct{}) bool {
	for {
		s.mu.Lock()
		if !s.paused {
			s.mu.Unlock()
			return true
		}
		ch := s.resumed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

// Restart stops the server and starts it again on the same address, as a
// process restart would: every connection is closed. With keepData the
// tree, the zxid and the sessions survive (ZooKeeper restores them from its
// snapshot and log), each session's timeout starting again from now;
// without it the server comes back empty at zxid 0, and, as ZooKeeper does,
// refuses a client that has seen a later zxid by closing its connection.
func (s *Server) Restart(keepData bool) error {
	s.life.Lock()
	defer s.life.Unlock()
	if err := s.down(); err != nil {
		return err
	}
	if !keepData {
		s.mu.Lock()
		s.resetLocked()
		s.mu.Unlock()
	}
	return s.up()
}

// Down stops the server as a process stop would, keeping its data: it
// stops listening, closes every connection and stops the session timers
// (no session expires while the server is down). Up brings it back.
// Down on a server already down does nothing.
func (s *Server) Down() error {
	s.life.Lock()
	defer s.life.Unlock()
	return s.down()
}

// Up starts a server that Down stopped again, on the same address, as a
// restart with its data: each session's timeout starts again from now. Up
// on a server that is up does nothing.
func (s *Server) Up() error {
	s.life.Lock()
	defer s.life.Unlock()
	return s.up()
}

// down is Down; s.life is held.
func (s *Server) down() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.ln == nil {
		s.mu.Unlock()
		return nil
	}
	ln := s.unlistenLocked()
	for _, sess := range s.sessions {
		sess.stopTimer()
	}
	if s.paused { // a restarted process answers again
		s.paused = false
		close(s.resumed)
	}
	s.changedLocked()
	s.mu.Unlock()
	_ = ln.Close()
	s.wg.Wait()
	return nil
}

// up is Up; s.life is held.
func (s *Server) up() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.ln != nil {
		return nil
	}
	for _, sess := range s.sessions {
		s.touchLocked(sess)
		s.armLocked(sess, sess.timeout)
	}
	nl, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.closed = true
		return fmt.Errorf("minizk: listen again on %s: %w", s.addr, err)
	}
	s.ln = nl
	s.changedLocked()
	s.serve(nl)
	return nil
}

// advancer is a clock that a test moves by hand (lockproof's fakes.Clock).
type advancer interface{ Advance(time.Duration) }

// Advance moves the server's manual clock forward by d and expires every
// session whose timeout passed, before it returns. It returns ErrNotManual
// if the clock has no Advance method.
func (s *Server) Advance(d time.Duration) error {
	a, ok := anyclock.Underlying(s.cfg.clock).(advancer)
	if !ok {
		return ErrNotManual
	}
	a.Advance(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.expireDueLocked()
	}
	return nil
}

// WaitFor blocks until cond holds or ctx ends. cond runs with the server
// locked, and again after every change (a session, a connection, a write,
// a watch): it must not call the Server's methods; it gets a View.
func (s *Server) WaitFor(ctx context.Context, cond func(View) bool) error {
	for {
		s.mu.Lock()
		ok := cond(View{s})
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("minizk: wait: %w", ctx.Err())
		}
	}
}

// View is the server's state as WaitFor's condition sees it.
type View struct{ s *Server }

// Sessions returns the number of live sessions.
func (v View) Sessions() int { return len(v.s.sessions) }

// Connected returns the number of sessions attached to a connection.
func (v View) Connected() int {
	n := 0
	for _, sess := range v.s.sessions {
		if sess.conn != nil {
			n++
		}
	}
	return n
}

// Exists reports whether a znode is at path.
func (v View) Exists(path string) bool { return v.s.st.nodes[path] != nil }

// NumChildren returns the number of children of the znode at path (0 if
// there is none).
func (v View) NumChildren(path string) int {
	if n := v.s.st.nodes[path]; n != nil {
		return len(n.children)
	}
	return 0
}

// Watches returns the number of data and exists watches (data) and child
// watches (child) on path.
func (v View) Watches(path string) (data, child int) {
	return len(v.s.dataW[path]), len(v.s.childW[path])
}

// WatchCount returns the number of watches set, of every kind on every
// path.
func (v View) WatchCount() int {
	n := 0
	for _, m := range []map[string]map[*conn]struct{}{v.s.dataW, v.s.childW} {
		for _, w := range m {
			n += len(w)
		}
	}
	return n
}

// sessionPassword is the password of session id as ZooKeeper generates it:
// 16 bytes of java.util.Random seeded with id ^ 0xB3415C00.
func sessionPassword(id int64) []byte {
	const mult, mask = 0x5DEECE66D, (1 << 48) - 1
	seed := (uint64(id^0xB3415C00) ^ mult) & mask
	next := func() int32 {
		seed = (seed*mult + 0xB) & mask
		return int32(seed >> 16)
	}
	out := make([]byte, 16)
	for i := 0; i < len(out); {
		r := next()
		for n := 0; n < 4 && i < len(out); n++ {
			out[i] = byte(r)
			r >>= 8
			i++
		}
	}
	return out
}

// Reap runs one pass of ZooKeeper's container manager and returns the
// paths it deleted, sorted: every container node that has had children
// and has none left, and every TTL node without children that has not
// changed for longer than its TTL on the server's clock. Each deletion is
// a transaction of its own (a zxid, the watches fired), as the manager's
// deletes are. ZooKeeper runs the pass every minute by itself; minizk only
// when a test calls Reap.
func (s *Server) Reap() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var paths []string
	for p, n := range s.st.nodes {
		if n.reapable(now) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		s.st.zxid++
		x := &txn{t: s.st, zxid: s.st.zxid, now: now, super: true}
		x.deleteNode(p)
		s.fireLocked(x.events)
	}
	return paths
}
