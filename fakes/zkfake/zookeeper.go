package zkfake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/fakeutil"
	"github.com/lockproof/lockproof/fakes/minizk"
	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/internal/zkrace"
	"github.com/lockproof/lockproof/locks"
)

// EnvAddr names the environment variable that points ZooKeeper at a real
// server (host:port) instead of minizk. Tests share that server; each fake
// works under its own Prefix and deletes it at cleanup.
const EnvAddr = "LOCKPROOF_ZK_ADDR"

// Option configures ZooKeeper and Start.
type Option func(*zkConfig)

type zkConfig struct {
	manual    bool
	start     time.Time
	forceMini bool
	addr      string // ZooKeeperAt
	tick      time.Duration
	dial      zk.Dialer // Dialer; nil: TCP
}

// Dialer makes the fake reach a real server (At) through dial: for a server
// only a special dialer reaches, such as one in a network namespace of its
// own. Default: TCP. minizk is always reached as usual.
func Dialer(dial zk.Dialer) Option { return func(c *zkConfig) { c.dial = dial } }

// At makes the fake use the real server at addr (host:port)
// instead of minizk. The fake works under its own Prefix there and deletes
// it at Close. Default (and with addr ""): minizk.
func At(addr string) Option { return func(c *zkConfig) { c.addr = addr } }

// ManualTime runs minizk on a manual *Clock reading start:
// sessions expire only when Advance moves it past their timeout. Default:
// real time. A real server's clock cannot be stopped: there the option only
// makes Advance sleep.
func ManualTime(start time.Time) Option {
	return func(c *zkConfig) { c.manual, c.start = true, start }
}

// ForceMinizk uses minizk even when a real server is given, by At
// or, for ZooKeeper, by EnvAddr. Default: a real server when one is
// given. Use it for tests that need minizk's
// controls (ExpireSession, DropConnections, Pause, Restart) or exact manual
// time.
func ForceMinizk() Option { return func(c *zkConfig) { c.forceMini = true } }

// TickTime sets minizk's tickTime (default minizk.DefaultTickTime,
// 2s, ZooKeeper's): session timeouts are clamped to [2, 20] ticks. A real
// server keeps its own.
func TickTime(d time.Duration) Option {
	return func(c *zkConfig) { c.tick = d }
}

// Server is one ZooKeeper server: minizk on a loopback port, or
// a real server (At, or EnvAddr for ZooKeeper). Close stops minizk and closes every
// client Connect handed out; on a real server it deletes Prefix first.
type Server struct {
	owner  fakeutil.Owner
	addr   string
	prefix string
	clock  *fakes.Clock // nil: real time
	manual bool
	mini   *minizk.Server
	dial   zk.Dialer // to a real server; nil: TCP

	mu      sync.Mutex
	clients []*zk.Conn
	closed  bool
}

// New starts a ZooKeeper server for t with Start: minizk,
// or the real server of EnvAddr (read here, as a At before
// opts) unless ForceMinizk is given. Everything is closed by t.Cleanup; it
// fails the test if the server cannot be started or reached.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	return fakeutil.ForTest(t, "zkfake.New", EnvAddr, opts, At,
		func(o []Option) string { return newZKConfig(o).addr }, Start,
		func(s *Server, tb testing.TB) { s.owner.Own(tb) })
}

// Start starts minizk on a loopback port chosen by the kernel, or
// connects to the real server given by At (unless ForceMinizk),
// for programs and examples that have no testing.TB. It returns an error
// if the server cannot be started or gives no session. Close stops it.
func Start(opts ...Option) (*Server, error) {
	cfg := newZKConfig(opts)
	if cfg.addr != "" {
		return realZooKeeper(cfg.addr, cfg)
	}
	return startMinizk(cfg)
}

func newZKConfig(opts []Option) zkConfig {
	c := zkConfig{tick: minizk.DefaultTickTime}
	fakeutil.ApplyOptions(&c, opts)
	if c.forceMini {
		c.addr = ""
	}
	return c
}

func startMinizk(cfg zkConfig) (*Server, error) {
	z := &Server{prefix: zkPrefix(), manual: cfg.manual}
	if cfg.manual {
		z.clock = fakes.NewClock(cfg.start)
	}
	s, err := minizk.Start(minizk.WithClock(fakeutil.ClockOf(z.clock)), minizk.WithTickTime(cfg.tick))
	if err != nil {
		return nil, err
	}
	z.mini, z.addr = s, s.Addr()
	return z, nil
}

// realZooKeeper checks that the server at addr answers and returns the
// fake for it.
func realZooKeeper(addr string, cfg zkConfig) (*Server, error) {
	dial := cfg.dial
	if dial == nil {
		dial = net.DialTimeout
	}
	nc, err := dial("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("zookeeper at %s: %w", addr, err)
	}
	_ = nc.Close()
	z := &Server{addr: addr, prefix: zkPrefix(), manual: cfg.manual, dial: cfg.dial}
	c, _, err := z.Connect(10 * time.Second)
	if err == nil {
		_, _, err = c.Exists("/")
	}
	if err != nil {
		_ = z.Close()
		return nil, fmt.Errorf("zookeeper at %s: %w", addr, err)
	}
	return z, nil
}

// zkPrefix returns a znode path unique to one fake.
func zkPrefix() string { return "/lockproof-test-" + locks.NewOwner()[:8] }

// zkQuiet drops go-zookeeper's connection log lines.
type zkQuiet struct{}

// Printf discards the line.
func (zkQuiet) Printf(string, ...any) {}

// Connect returns a new go-zookeeper client with the given session
// timeout, its log silenced, closed by Close. It returns once the client
// has a session (or after 10s with an error). The events channel holds the
// client's events (session states and watch events) up to 256 unread;
// later ones are dropped, as go-zookeeper drops what its own channel of 6
// cannot take.
//
// go-zookeeper's requests take no context, so there is no seam to pass
// them through a locks.Gate: unlike the other fakes' clients, these are not
// gated.
func (z *Server) Connect(sessionTimeout time.Duration) (*zk.Conn, <-chan zk.Event, error) {
	if z.dial != nil {
		return z.connect(z.addr, sessionTimeout, zk.WithDialer(z.dial))
	}
	return z.connect(z.addr, sessionTimeout)
}

// ConnectManual is Connect for a client of minizk in manual time, through
// addr: the server's Addr, or a proxy in front of it (a chaos.Proxy). Two
// of go-zookeeper's ways run on the wall clock, which the run's manual
// clock does not follow, and are changed:
//
//   - Pings: go-zookeeper pings every third of the session timeout of wall
//     time, which would renew sessions at moments nothing in the test
//     decides. ConnectManual's client never sends them (its dialer drops
//     them): keep its session alive with requests, on the manual clock.
//     With no ping, go-zookeeper gives an idle connection up after 2/3 of
//     the session timeout of wall time: give sessions timeouts longer than
//     a test runs.
//   - Reconnects: go-zookeeper pauses a second of wall time before it dials
//     its one server again. ConnectManual's client redials at once twice
//     after a connection is lost (once to learn that its session expired,
//     once for a new session) and pauses only after that.
//
// onRequest, if not nil, is called with the opcode of each request the
// client writes (pings included, dropped after the call; not the
// handshake), on go-zookeeper's sending goroutine.
//
// When addr is minizk's own Addr, the client connects in memory
// (minizk.Server.DialInMemory), never through a socket: every request in
// flight is then a runnable goroutine, as the property suite's scheduler
// needs to replay a seed exactly (propertytest.Backend.InProcess), and a
// stopped server refuses the dial as its closed port would. Through any
// other address (a proxy), or to a real server, it dials TCP.
func (z *Server) ConnectManual(addr string, sessionTimeout time.Duration, onRequest func(opcode int32)) (*zk.Conn, error) {
	d := &zkManualDialer{onRequest: onRequest}
	if z.mini != nil && addr == z.addr {
		d.inMemory = z.mini.DialInMemory
	}
	c, _, err := z.connect(addr, sessionTimeout, zk.WithDialer(d.dial), zk.WithHostProvider(&zkRedialer{}))
	return c, err
}

func (z *Server) connect(addr string, sessionTimeout time.Duration, opts ...func(*zk.Conn)) (*zk.Conn, <-chan zk.Event, error) {
	z.mu.Lock()
	closed := z.closed
	z.mu.Unlock()
	if closed {
		return nil, nil, errClosed
	}
	events := make(chan zk.Event, 256)
	onEvent := func(e zk.Event) {
		select {
		case events <- e:
		default:
		}
	}
	c, err := zkrace.Connect([]string{addr}, sessionTimeout, 10*time.Second, onEvent, append([]func(*zk.Conn){zk.WithLogger(zkQuiet{})}, opts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("zkfake: %s: %w", addr, err)
	}
	z.mu.Lock()
	closed = z.closed
	if !closed {
		z.clients = append(z.clients, c)
	}
	z.mu.Unlock()
	if closed { // while the session was on its way
		c.Close()
		return nil, nil, errClosed
	}
	return c, events, nil
}

// errClosed is connect's error once the server is closed.
var errClosed = errors.New("zkfake: zookeeper server closed")

// Close closes every client Connect handed out and stops minizk; on a real
// server it first deletes everything under Prefix. Closing twice does
// nothing.
func (z *Server) Close() error {
	var err error
	if z.mini == nil {
		// A client of its own: the test may have closed all of its.
		c, _, cerr := z.Connect(10 * time.Second)
		err = cerr
		if cerr == nil {
			err = deleteTree(c, z.prefix)
		}
	}
	z.mu.Lock()
	if z.closed {
		z.mu.Unlock()
		return nil
	}
	z.closed = true
	clients := z.clients
	z.mu.Unlock()
	for _, c := range clients {
		c.Close()
	}
	if z.mini != nil {
		err = errors.Join(err, z.mini.Close())
	}
	return err
}

// deleteTree deletes p and everything below it, if it exists.
func deleteTree(c *zk.Conn, p string) error {
	kids, _, err := c.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("zkfake: cleaning %s: %w", p, err)
	}
	for _, k := range kids {
		if err := deleteTree(c, p+"/"+k); err != nil {
			return err
		}
	}
	if err := c.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("zkfake: cleaning %s: %w", p, err)
	}
	return nil
}

// Addr returns the server's host:port.
func (z *Server) Addr() string { return z.addr }

// Servers returns the server list to pass to zk.Connect.
func (z *Server) Servers() []string { return []string{z.addr} }

// Prefix returns a znode path unique to this fake ("/lockproof-test-<8
// hex>"), not created: LockOptions passes it to locks.
func (z *Server) Prefix() string { return z.prefix }

// Clock returns the clock the server's time follows: the manual *Clock
// with ManualTime on minizk, else locks.SystemClock.
func (z *Server) Clock() locks.Clock { return fakeutil.ClockOf(z.clock) }

// LockOptions returns the options a test passes to a lock constructor so
// that the lock uses this fake's Prefix and Clock.
func (z *Server) LockOptions() []locks.Option { return fakeutil.LockOptions(z.prefix, z.clock) }

// Real reports whether the server is a real one (At, EnvAddr).
func (z *Server) Real() bool { return z.mini == nil }

// Minizk returns the minizk server, or nil on a real server. Its controls
// (ExpireSession, DropConnections, Pause, Restart, Get, Children, WaitFor)
// are the chaos a test can apply.
func (z *Server) Minizk() *minizk.Server { return z.mini }

// RequireMinizk skips the test on a real server, saying why.
func (z *Server) RequireMinizk(t testing.TB, why string) {
	t.Helper()
	if z.mini == nil {
		t.Skipf("zkfake: needs minizk (%s); use zkfake.ForceMinizk to run it", why)
	}
}

// ErrNotManual is returned by AdvanceTime without
// ManualTime.
var ErrNotManual = errors.New("zkfake: Advance needs manual time: start the fake with zkfake.ManualTime(start)")

// AdvanceTime moves time forward by d. On minizk with ManualTime
// it moves the manual clock, and sessions whose timeout passed are expired
// before it returns. A real server's clock cannot be moved: with
// ManualTime AdvanceTime sleeps d so that the same test runs on
// both, slower. Without ManualTime it returns
// ErrNotManual, and an error for a negative d.
func (z *Server) AdvanceTime(d time.Duration) error {
	switch {
	case d < 0:
		return fmt.Errorf("zkfake: Advance(%v): time cannot move backwards", d)
	case !z.manual:
		return ErrNotManual
	case z.mini != nil:
		return z.mini.Advance(d)
	}
	time.Sleep(d)
	return nil
}

// Advance is AdvanceTime for tests, with the other fakes'
// signature: an error fails the test of New(t). On a server from
// Start, which has no test to fail, an error is a programming
// error (no manual time, or a negative d) and panics: call AdvanceTime
// there.
func (z *Server) Advance(d time.Duration) {
	if err := z.AdvanceTime(d); err != nil {
		z.owner.Helper()
		z.owner.Fatalf("%v", err)
	}
}

// ExpireSession expires session id now on minizk (see
// minizk.Server.ExpireSession); an unknown id is an error wrapping
// fakes.ErrNoSession. A real server gives no way to expire another
// client's session: there it returns an error.
func (z *Server) ExpireSession(id int64) error {
	if z.mini == nil {
		return errors.New("zkfake: ExpireSession needs minizk (use zkfake.ForceMinizk)")
	}
	err := z.mini.ExpireSession(id)
	if errors.Is(err, minizk.ErrNoSession) {
		return fmt.Errorf("zkfake: expire zookeeper session %#x: %w (%w)", id, fakes.ErrNoSession, err)
	}
	return err
}

// ExpireLock ends the current lease of zklock's lock name, under this
// fake's Prefix, now, on minizk: it expires the session of the contender
// with the lowest sequence number among the children of the lock's node
// (zklock.NodePath), the holder (of a semaphore or a read-write mutex, the
// first of the holders), as ExpireSession does. Waiters keep their
// places. It fails, with an error wrapping ErrNoHolder, when nobody holds
// the lock; on a real server, which cannot expire another client's
// session, it fails as ExpireSession does.
func (z *Server) ExpireLock(ctx context.Context, name string) error {
	if z.mini == nil {
		return errors.New("zkfake: ExpireLock needs minizk (use zkfake.ForceMinizk)")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("zkfake: expire zookeeper lock %q: %w", name, err)
	}
	node := layout.ZKNode(z.prefix, name)
	kids, err := z.mini.Children(node)
	if err != nil {
		return fmt.Errorf("zkfake: expire zookeeper lock %q: no node %s (%v): %w", name, node, err, fakes.ErrNoHolder)
	}
	holder, ok := layout.ZKHolder(kids)
	if !ok {
		return fmt.Errorf("zkfake: expire zookeeper lock %q: %w", name, fakes.ErrNoHolder)
	}
	_, st, err := z.mini.Get(node + "/" + holder)
	if err != nil || st.EphemeralOwner == 0 {
		return fmt.Errorf("zkfake: expire zookeeper lock %q: the holder's node went meanwhile: %w", name, fakes.ErrNoHolder)
	}
	if err := z.mini.ExpireSession(st.EphemeralOwner); err != nil {
		return fmt.Errorf("zkfake: expire zookeeper lock %q: %w", name, err)
	}
	return nil
}

var (
	_ fakes.Server                = (*Server)(nil)
	_ fakes.ManualTimer           = (*Server)(nil)
	_ fakes.SessionExpirer[int64] = (*Server)(nil)
)
