package minizk

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lockproof/lockproof/fakes/internal/anyclock"
	"github.com/lockproof/lockproof/internal/memnet"
)

// DefaultTickTime is ZooKeeper's default tickTime: sessions may last from 2
// to 20 ticks.
const DefaultTickTime = 2 * time.Second

// maxPacket is the largest packet accepted: ZooKeeper's jute.maxbuffer
// default, 0xfffff bytes. A longer length prefix closes the connection.
const maxPacket = 0xfffff

// Option configures a Server.
type Option func(*config)

type config struct {
	clock       anyclock.Clock
	tick        time.Duration
	addr        string
	superDigest string // "user:digest" of the super user, or ""
	extended    bool   // TTL nodes (zookeeper.extendedTypesEnabled)
}

// Timer is what the server needs of a timer its Clock starts: a way to
// stop it. *time.Timer and lockproof's locks.Timer are Timers.
type Timer = interface{ Stop() bool }

// Clock is the time a server follows: Now, and AfterFunc, which calls f
// after d unless its timer is stopped first. Its timers may be of any
// type T that can be stopped, so that a clock of another package fits as
// it is (lockproof's locks.Clock and its manual fakes.Clock); a clock
// with an Advance(time.Duration) method is a manual one.
type Clock[T Timer] interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) T
}

// WithClock sets the clock that session expiry and znode times follow
// (default: the time package's). With a manual clock (lockproof's
// fakes.Clock) a session expires only when the clock is advanced past its
// deadline.
func WithClock[T Timer](c Clock[T]) Option { return func(o *config) { o.clock = anyclock.Wrap(c) } }

// WithTickTime sets the server's tickTime (default DefaultTickTime, 2s): a
// client's requested session timeout is clamped to [2, 20] ticks.
func WithTickTime(d time.Duration) Option { return func(o *config) { o.tick = d } }

// WithAddr sets the address to listen on (default "127.0.0.1:0": loopback,
// a port chosen by the kernel).
func WithAddr(addr string) Option { return func(o *config) { o.addr = addr } }

// WithSuperDigest names the super user, who passes every ACL check, by
// the id of a digest ACL ("user:" and the base64 SHA-1 of
// "user:password"), as ZooKeeper's
// zookeeper.DigestAuthenticationProvider.superDigest does. A connection
// that adds that user's credentials with addAuth is the super user.
func WithSuperDigest(id string) Option { return func(o *config) { o.superDigest = id } }

// WithExtendedTypes turns TTL nodes on, as ZooKeeper's
// zookeeper.extendedTypesEnabled does; without it a TTL create gets
// UNIMPLEMENTED.
func WithExtendedTypes() Option { return func(o *config) { o.extended = true } }

// Server is an in-process ZooKeeper server on a TCP port. Start it with
// Start; Close stops it. Safe for concurrent use.
type Server struct {
	cfg  config
	addr string

	life sync.Mutex     // serializes Close and Restart
	wg   sync.WaitGroup // the accept loop and every connection's goroutines

	mu       sync.Mutex
	ln       net.Listener
	closed   bool
	st       *tree
	sessions map[int64]*session
	nextSID  int64
	conns    map[*conn]struct{}
	dataW    map[string]map[*conn]struct{} // getData and exists watches
	childW   map[string]map[*conn]struct{} // getChildren watches
	paused   bool
	recvGone int64 // packets read and written on connections now closed
	sentGone int64
	resumed  chan struct{} // closed by Resume
	changed  chan struct{} // closed and replaced at every change (WaitFor)
}

// Start starts a server listening on 127.0.0.1 with a port chosen by the
// kernel (see WithAddr).
func Start(opts ...Option) (*Server, error) {
	cfg := config{clock: anyclock.System{}, tick: DefaultTickTime, addr: "127.0.0.1:0"}
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	switch {
	case cfg.clock == nil:
		return nil, errors.New("minizk: nil clock")
	case cfg.tick < time.Millisecond:
		return nil, fmt.Errorf("minizk: tick time %v below 1ms", cfg.tick)
	case cfg.superDigest != "" && strings.Count(cfg.superDigest, ":") != 1:
		return nil, fmt.Errorf("minizk: super digest %q is not user:digest", cfg.superDigest)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("minizk: listen on %s: %w", cfg.addr, err)
	}
	s := &Server{cfg: cfg, addr: ln.Addr().String(), ln: ln, changed: make(chan struct{})}
	s.resetLocked()
	s.serve(ln)
	return s, nil
}

// resetLocked empties the server: a fresh tree, no sessions, no watches.
func (s *Server) resetLocked() {
	s.st = newTree()
	s.sessions = map[int64]*session{}
	// Session ids as ZooKeeper makes them: the time in ms shifted into the
	// middle bits, the server id (1 for a standalone server) in the top
	// byte, then counting up.
	s.nextSID = (s.cfg.clock.Now().UnixMilli()&(1<<40-1))<<16 | 1<<56
	s.conns = map[*conn]struct{}{}
	s.dataW = map[string]map[*conn]struct{}{}
	s.childW = map[string]map[*conn]struct{}{}
}

// serve starts accepting connections on ln.
func (s *Server) serve(ln net.Listener) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return // the listener was closed
			}
			s.mu.Lock()
			if s.closed || s.ln != ln {
				s.mu.Unlock()
				_ = nc.Close()
				continue
			}
			s.attachLocked(nc)
			s.mu.Unlock()
		}
	}()
}

// attachLocked serves the connection nc: its reading and writing
// goroutines, counted in wg.
func (s *Server) attachLocked(nc net.Conn) {
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.wg.Add(2)
	go c.readLoop()
	go c.writeLoop()
}

// DialInMemory connects a client to the server without a socket: the
// server serves one end of an in-memory connection (internal/memnet) and
// the client gets the other, for go-zookeeper's zk.WithDialer. It is a
// connection like any accepted on Addr (DropConnections, Pause and
// Restart act on it alike), but a request in flight is a runnable
// goroutine rather than bytes in the kernel, which lets the property
// suite's scheduler see that nothing is moving (see
// propertytest.Backend.InProcess). While the server is closed, or between
// the stop and the start of a Restart, the dial is refused as a closed
// port refuses it.
func (s *Server) DialInMemory() (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.ln == nil {
		return nil, memnet.Refused(s.addr)
	}
	client, server := memnet.Pipe(memnet.Addr("client of "+s.addr), memnet.Addr(s.addr))
	s.attachLocked(server)
	return client, nil
}

// Close stops the server: it stops listening, closes every connection and
// stops the session timers, and returns once every goroutine it started
// has ended. Closing twice does nothing.
func (s *Server) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ln := s.unlistenLocked()
	for _, sess := range s.sessions {
		sess.stopTimer()
	}
	if s.paused {
		s.paused = false
		close(s.resumed)
	}
	s.changedLocked()
	s.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
	}
	s.wg.Wait()
	return err
}

// unlistenLocked takes the listener away and closes every connection; the
// caller closes the listener and waits for the goroutines.
func (s *Server) unlistenLocked() net.Listener {
	ln := s.ln
	s.ln = nil
	s.dropLocked(0)
	return ln
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Clock returns the clock the server's time follows.
func (s *Server) Clock() Clock[Timer] { return s.cfg.clock }

// TickTime returns the server's tickTime.
func (s *Server) TickTime() time.Duration { return s.cfg.tick }

// Zxid returns the zxid of the last transaction.
func (s *Server) Zxid() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.zxid
}

// changedLocked wakes WaitFor.
func (s *Server) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// now is the server's time in ms since the epoch, as znodes carry it.
func (s *Server) now() int64 { return s.cfg.clock.Now().UnixMilli() }

// Sessions returns the ids of the live sessions, sorted.
func (s *Server) Sessions() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireDueLocked()
	ids := make([]int64, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// SessionTimeout returns the negotiated timeout of session id.
func (s *Server) SessionTimeout(id int64) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[id]
	if sess == nil {
		return 0, fmt.Errorf("%w: %#x", ErrNoSession, id)
	}
	return sess.timeout, nil
}

// LastHeard returns the server's time when it last heard from session id
// (a request, a ping or the handshake): its timeout counts from then.
func (s *Server) LastHeard(id int64) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[id]
	if sess == nil {
		return time.Time{}, fmt.Errorf("%w: %#x", ErrNoSession, id)
	}
	return sess.lastHeard, nil
}

// Get returns the data and stat of the znode at path.
func (s *Server) Get(path string) ([]byte, Stat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireDueLocked()
	n := s.st.nodes[path]
	if n == nil {
		return nil, Stat{}, fmt.Errorf("%w: %s", ErrNoNode, path)
	}
	return append([]byte(nil), n.data...), n.statOut(), nil
}

// Children returns the names of the children of the znode at path, sorted.
func (s *Server) Children(path string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireDueLocked()
	n := s.st.nodes[path]
	if n == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoNode, path)
	}
	return n.childNames(), nil
}

// Watches returns how many watches are set on path: data and exists
// watches, and child watches, one per connection.
func (s *Server) Watches(path string) (data, child int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.dataW[path]), len(s.childW[path])
}
