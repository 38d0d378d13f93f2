package miniconsul

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockproof/lockproof/fakes/internal/anyclock"
	"github.com/lockproof/lockproof/internal/memnet"
)

// Defaults of a Server, as on a Consul agent with its default configuration.
const (
	// DefaultSessionTTLMin is the shortest session TTL accepted (Consul's
	// session_ttl_min default).
	DefaultSessionTTLMin = 10 * time.Second
	// SessionTTLMax is the longest session TTL accepted (Consul's fixed
	// maximum).
	SessionTTLMax = 24 * time.Hour
	// DefaultSessionTTLMultiplier is how many TTLs after its last renewal a
	// session is invalidated: Consul arms its session timers with TTL × 2.
	DefaultSessionTTLMultiplier = 2
	// MaxLockDelay caps a session's lock-delay when it is applied, as Consul
	// does (it accepts longer values at create and clamps them silently).
	MaxLockDelay = 60 * time.Second
	// DefaultLockDelay is the lock-delay of a session created without one.
	DefaultLockDelay = 15 * time.Second
	// DefaultQueryWait is the wait of a blocking query that gives an index
	// but no wait.
	DefaultQueryWait = 5 * time.Minute
	// MaxQueryWait caps the wait of a blocking query.
	MaxQueryWait = 10 * time.Minute
	// DefaultNodeName is the node every session is created on.
	DefaultNodeName = "miniconsul"
	// DefaultDatacenter is the server's datacenter, as an agent's default.
	DefaultDatacenter = "dc1"
	// MaxValueSize is the largest KV value accepted (Consul's
	// kv_max_value_size default).
	MaxValueSize = 512 * 1024
)

// Option configures a Server.
type Option func(*config)

type config struct {
	clock      anyclock.Clock
	ttlMin     time.Duration
	multiplier int
	node       string
	dc         string
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

// WithClock sets the clock that session TTLs, lock-delays and blocking-query
// waits follow (default: the time package's). Pass a manual clock
// (lockproof's fakes.Clock) to make time an input of a test.
func WithClock[T Timer](c Clock[T]) Option { return func(o *config) { o.clock = anyclock.Wrap(c) } }

// WithSessionTTLMin sets the shortest session TTL accepted (default
// DefaultSessionTTLMin, 10s), as Consul's session_ttl_min does.
func WithSessionTTLMin(d time.Duration) Option { return func(o *config) { o.ttlMin = d } }

// WithSessionTTLMultiplier sets after how many TTLs without renewal a session
// is invalidated (default DefaultSessionTTLMultiplier, 2, as Consul). 1
// invalidates it exactly at its TTL: the earliest moment Consul's contract
// allows, useful to test a client against the strictest server.
func WithSessionTTLMultiplier(n int) Option { return func(o *config) { o.multiplier = n } }

// WithNodeName sets the node name sessions are created on (default
// DefaultNodeName).
func WithNodeName(name string) Option { return func(o *config) { o.node = name } }

// WithDatacenter sets the server's datacenter (default DefaultDatacenter,
// "dc1"): a request whose ?dc= names another is refused as an agent
// refuses a datacenter it has no path to.
func WithDatacenter(name string) Option { return func(o *config) { o.dc = name } }

// Server is an in-memory Consul HTTP API on a loopback port chosen by the
// kernel. Start it with Start; Close stops it. Safe for concurrent use.
type Server struct {
	cfg     config
	ln      net.Listener
	mem     *memnet.Listener // DialInMemory's connections
	srv     *http.Server
	url     string
	st      *store
	closed  chan struct{}
	once    sync.Once
	wg      sync.WaitGroup // requests being served
	trackMu sync.Mutex     // orders track's wg.Add with Close's close(closed)
	// checked, if set, runs between a lock's lock-delay check and its
	// apply (see AfterLockDelayCheck).
	checked atomic.Pointer[func(key string)]
}

// AfterLockDelayCheck makes the server run f(key) each time a lock on key
// (a KV acquire, or a transaction's lock) has passed the lock-delay check
// and is about to be applied, with the server's state unlocked; nil turns
// it off. Consul's leader checks the lock-delay before the write goes to
// Raft, so a write that commits in between, such as the invalidation of
// the session holding key, is not seen by the check: an acquire in flight
// at an invalidation can win inside the lock-delay. Without f, miniconsul
// checks and applies at once and never shows that race; with f, a test
// puts the invalidation exactly there.
func (s *Server) AfterLockDelayCheck(f func(key string)) {
	if f == nil {
		s.checked.Store(nil)
		return
	}
	s.checked.Store(&f)
}

// lockChecked runs the AfterLockDelayCheck hook, if one is set, for keys,
// with st.mu unlocked: the caller's checks made under the lock before it
// are then stale, as Consul's are.
func (s *Server) lockChecked(keys ...string) {
	f := s.checked.Load()
	if f == nil || len(keys) == 0 {
		return
	}
	s.st.mu.Unlock()
	defer s.st.mu.Lock()
	for _, k := range keys {
		(*f)(k)
	}
}

// Start starts a server on 127.0.0.1 with a port chosen by the kernel.
func Start(opts ...Option) (*Server, error) {
	cfg := config{clock: anyclock.System{}, ttlMin: DefaultSessionTTLMin,
		multiplier: DefaultSessionTTLMultiplier, node: DefaultNodeName, dc: DefaultDatacenter}
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	switch {
	case cfg.clock == nil:
		return nil, errors.New("miniconsul: nil clock")
	case cfg.ttlMin <= 0 || cfg.ttlMin > SessionTTLMax:
		return nil, fmt.Errorf("miniconsul: session TTL minimum %v out of (0, %v]", cfg.ttlMin, SessionTTLMax)
	case cfg.multiplier < 1:
		return nil, fmt.Errorf("miniconsul: session TTL multiplier %d below 1", cfg.multiplier)
	case cfg.node == "":
		return nil, errors.New("miniconsul: empty node name")
	case cfg.dc == "":
		return nil, errors.New("miniconsul: empty datacenter name")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("miniconsul: listen on loopback: %w", err)
	}
	s := &Server{cfg: cfg, ln: ln, mem: memnet.Listen(memnet.Addr(ln.Addr().String())),
		url: "http://" + ln.Addr().String(), closed: make(chan struct{})}
	s.st = newStore(cfg)
	s.srv = &http.Server{
		Handler:           s.routes(),
		ErrorLog:          log.New(io.Discard, "", 0),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.Background() },
	}
	go func() { _ = s.srv.Serve(ln) }()    // returns ErrServerClosed at Close
	go func() { _ = s.srv.Serve(s.mem) }() // likewise
	return s, nil
}

// DialInMemory connects a client to the server without a socket: the
// server serves one end of an in-memory connection (internal/memnet) as
// it serves a connection accepted on Addr, and the client gets the other.
// It has the signature of http.Transport's DialContext (network and
// address are not used), so that a Consul api client's transport can dial
// with it. A request in flight is then a runnable goroutine rather than
// bytes in the kernel, which lets the property suite's scheduler see that
// nothing is moving (see propertytest.Backend.InProcess). Once the server
// is closed, the dial is refused as a closed port refuses it.
func (s *Server) DialInMemory(ctx context.Context, network, address string) (net.Conn, error) {
	return s.mem.Dial(ctx, network, address)
}

// Close stops the server: blocking queries in flight return at once,
// connections are closed and session timers stopped. It returns once every
// request handler has returned. Closing twice does nothing.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		s.trackMu.Lock() // see track
		close(s.closed)
		s.trackMu.Unlock()
		err = s.srv.Close()
		_ = s.mem.Close() // closed by srv.Close too, unless its Serve had not begun
		s.wg.Wait()
		s.st.stop()
	})
	return err
}

// Addr returns the server's host:port, for api.Config.Address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the server's base URL, "http://host:port".
func (s *Server) URL() string { return s.url }

// Clock returns the clock the server's time follows.
func (s *Server) Clock() Clock[Timer] { return s.cfg.clock }

// NodeName returns the node sessions are created on.
func (s *Server) NodeName() string { return s.cfg.node }

// Datacenter returns the server's datacenter.
func (s *Server) Datacenter() string { return s.cfg.dc }

// SessionTTLMin returns the shortest session TTL the server accepts.
func (s *Server) SessionTTLMin() time.Duration { return s.cfg.ttlMin }

// Index returns the server's current raft-like index: the index of its last
// write.
func (s *Server) Index() uint64 {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.index
}

// InvalidateSession invalidates session id now, exactly as a TTL expiry
// does on Consul: its locks are released (or its keys deleted, for
// Behavior "delete") and its lock-delay starts on each of them. It reports
// whether the session existed. An explicit destroy through the API has the
// same effect.
func (s *Server) InvalidateSession(id string) bool {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.invalidateLocked(id)
}

// Sessions returns the IDs of the live sessions, sorted.
func (s *Server) Sessions() []string {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.st.expireDueLocked()
	return s.st.sessionIDsLocked()
}

// LockDelay returns until when key is under a lock-delay (an acquire is
// refused while the server's clock is before it), or the zero time.
func (s *Server) LockDelay(key string) time.Time {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.delays[key]
}

// Blocked returns the number of blocking queries parked on the server,
// waiting for a change or for their wait to end.
func (s *Server) Blocked() int {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.blocked
}

// WaitBlocked waits until at least n blocking queries are parked on the
// server, or ctx ends. Tests call it before changing state or advancing the
// clock, to be sure a client has started waiting.
func (s *Server) WaitBlocked(ctx context.Context, n int) error {
	for {
		s.st.mu.Lock()
		if s.st.blocked >= n {
			s.st.mu.Unlock()
			return nil
		}
		ch := s.st.blockedCh
		s.st.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("miniconsul: waiting for %d blocked queries: %w", n, ctx.Err())
		}
	}
}

// WaitParked waits until at least n blocking queries on key (a single-key
// KV read) are parked with an index of at least index, or ctx ends. A test
// learns that way that a client has seen the key at index and is waiting
// for the next change: the state a client reaches after a wake-up, which a
// count of all parked queries cannot tell apart from the one before.
func (s *Server) WaitParked(ctx context.Context, key string, index uint64, n int) error {
	for {
		s.st.mu.Lock()
		got := 0
		for p := range s.st.parked {
			if p.key == key && p.minIndex >= index {
				got++
			}
		}
		if got >= n {
			s.st.mu.Unlock()
			return nil
		}
		ch := s.st.blockedCh
		s.st.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("miniconsul: waiting for %d queries parked on %q at index %d or above (%d are): %w",
				n, key, index, got, ctx.Err())
		}
	}
}
