package consulfake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/fakeutil"
	"github.com/lockproof/lockproof/fakes/miniconsul"
	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/locks"
)

// EnvBin names the environment variable that gives the path of a
// consul binary (as built by tools/consul). With it, or with a consul on
// PATH, Consul starts a real agent; otherwise miniconsul. Start
// reads neither: it runs an agent only with Agent.
const EnvBin = "LOCKPROOF_CONSUL_BIN"

// Option configures Start (and Consul).
type Option func(*consulConfig)

type consulConfig struct {
	manual     bool
	start      time.Time
	forceMini  bool
	forceAgent bool
	bin        string // ConsulAgent
	ttlMin     time.Duration
	multiplier int // ConsulSessionTTLMultiplier; 0: not given
}

// Agent makes the fake run a real agent from the consul binary at bin
// (a file named consul, as tools/consul builds it) instead of miniconsul.
// Default: miniconsul for Start; for Consul, the binary of
// EnvBin or PATH (Binary). sdk/testutil runs "consul" from
// PATH and has no other way to be told the binary: the first agent puts
// bin's directory at the head of the process's PATH, once.
func Agent(bin string) Option { return func(c *consulConfig) { c.bin = bin } }

// SessionTTLMin sets the shortest session TTL the server accepts (its
// session_ttl_min; default Consul's 10s), on miniconsul and on a real agent
// alike. Tests that watch sessions expire on a real agent lower it to keep
// the wait short.
func SessionTTLMin(d time.Duration) Option {
	return func(c *consulConfig) { c.ttlMin = d }
}

// SessionTTLMultiplier sets after how many TTLs without a renewal
// miniconsul invalidates a session: n = 1 ends it exactly at its TTL, the
// earliest moment Consul's contract allows, to test a client against the
// strictest server. Default 2 (miniconsul.DefaultSessionTTLMultiplier): at
// twice the TTL, the latest moment a real server reaches. A real agent
// invalidates a session somewhere in between, by a multiplier of its own
// that no setting changes: with Agent (and not ForceMiniconsul)
// Start fails, naming this option, and n < 1 fails on miniconsul.
func SessionTTLMultiplier(n int) Option {
	return func(c *consulConfig) {
		c.multiplier = n
		if n == 0 {
			c.multiplier = -1 // given, and out of range
		}
	}
}

// ManualTime runs miniconsul on a manual *Clock reading start: session
// TTLs, lock-delays and blocking-query waits stand still until Advance.
// Default: real time. A real agent cannot stop its clock: with it the option
// only makes Advance sleep (see Advance).
func ManualTime(start time.Time) Option {
	return func(c *consulConfig) { c.manual, c.start = true, start }
}

// ForceMiniconsul uses miniconsul even when a consul binary is given
// (Agent) or, for Consul, found. Default: a real agent when a binary
// is given or found. Use it for tests that need
// exact manual time or miniconsul's controls.
func ForceMiniconsul() Option { return func(c *consulConfig) { c.forceMini = true } }

// ForceAgent uses a real agent: Start fails without
// Agent, and Consul skips the test when no consul binary is found.
// Default: a real agent when a binary is given or found.
func ForceAgent() Option { return func(c *consulConfig) { c.forceAgent = true } }

// Server is one Consul server: miniconsul on a loopback port, or a
// real agent started through github.com/hashicorp/consul/sdk/testutil
// (single server, loopback ports chosen by the kernel, logs kept in memory:
// Logs). Close stops everything it started, after closing every client it
// handed out.
//
// A control that cannot go on (Advance without manual time) fails the test
// of a server from Consul, and panics on one from Start.
type Server struct {
	owner   fakeutil.Owner
	prefix  string
	clock   *fakes.Clock // nil: real time
	mini    *miniconsul.Server
	agent   *consulAgent
	addr    string
	startup time.Duration
	ttlMin  time.Duration
	client  *api.Client
	closed  atomic.Bool

	mu         sync.Mutex
	transports []*http.Transport
}

// Start starts miniconsul on a loopback port chosen by the kernel,
// or a real agent with Agent (unless ForceMiniconsul), for a program
// that has no test. It returns an error if the server cannot start, or on
// ForceAgent without Agent. Close stops it.
func Start(opts ...Option) (*Server, error) {
	cfg := newConsulConfig(opts)
	if cfg.forceMini && cfg.forceAgent {
		return nil, errors.New("ForceMiniconsul and ForceAgent exclude each other")
	}
	if cfg.forceAgent && cfg.bin == "" {
		return nil, errors.New("ForceAgent needs a consul binary: pass Agent(bin)")
	}
	c := &Server{prefix: "lockproof-test-" + locks.NewOwner()[:8] + "/", ttlMin: cfg.ttlMin}
	began := time.Now()
	if cfg.bin != "" && !cfg.forceMini {
		if cfg.multiplier != 0 {
			return nil, errors.New("consulfake: SessionTTLMultiplier needs miniconsul: a real agent invalidates a session" +
				" between TTL and 2×TTL by a multiplier of its own (add ForceMiniconsul)")
		}
		agent, err := startAgent(cfg.bin, cfg.ttlMin)
		if err != nil {
			return nil, err
		}
		agent.advanceSleeps = cfg.manual
		c.agent, c.addr = agent, agent.addr
	} else if err := c.startMini(cfg); err != nil {
		return nil, err
	}
	c.startup = time.Since(began)
	client, err := c.newClient()
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	c.client = client
	return c, nil
}

// New starts a Consul server for t with Start: a real agent when
// a consul binary is found (Binary: EnvBin, then PATH, read
// here, as a Agent before opts), else miniconsul; ForceMiniconsul
// and ForceAgent decide instead (the latter skips the test when no
// binary is found). It fails the test if the server cannot start, closes
// it at t's cleanup, and prints a real agent's output if the test failed.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	cfg, usedEnv := newConsulConfig(opts), false
	if !cfg.forceMini && cfg.bin == "" {
		if bin := Binary(); bin != "" {
			opts = append([]Option{Agent(bin)}, opts...)
			usedEnv = true
		} else if cfg.forceAgent {
			t.Skipf("consulfake: no consul binary: set %s or put consul on PATH (build one with tools/consul)", EnvBin)
		}
	}
	c, err := Start(opts...)
	if !fakeutil.StartFor(t, "consulfake.New", EnvBin, usedEnv, err, c) {
		return nil
	}
	c.owner.Own(t)
	t.Cleanup(func() { // runs before Close
		if t.Failed() && c.agent != nil {
			t.Logf("consulfake: consul agent output:\n%s", c.Logs())
		}
	})
	return c
}

func newConsulConfig(opts []Option) consulConfig {
	var cfg consulConfig
	fakeutil.ApplyOptions(&cfg, opts)
	if cfg.ttlMin == 0 {
		cfg.ttlMin = miniconsul.DefaultSessionTTLMin
	}
	return cfg
}

func (c *Server) startMini(cfg consulConfig) error {
	var clock locks.Clock = locks.SystemClock{}
	if cfg.manual {
		c.clock = fakes.NewClock(cfg.start)
		clock = c.clock
	}
	opts := []miniconsul.Option{miniconsul.WithClock(clock), miniconsul.WithSessionTTLMin(cfg.ttlMin)}
	if cfg.multiplier != 0 {
		opts = append(opts, miniconsul.WithSessionTTLMultiplier(cfg.multiplier))
	}
	s, err := miniconsul.Start(opts...)
	if err != nil {
		return fmt.Errorf("cannot start miniconsul: %w", err)
	}
	c.mini, c.addr = s, s.Addr()
	return nil
}

// Close closes the clients' idle connections and stops miniconsul or the
// agent. Closing twice does nothing.
func (c *Server) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	var err error
	switch {
	case c.mini != nil:
		if err = c.mini.Close(); err != nil {
			err = fmt.Errorf("closing miniconsul: %w", err)
		}
	case c.agent != nil:
		if err = c.agent.stop(); err != nil {
			err = fmt.Errorf("stopping the consul agent: %w", err)
		}
	}
	c.closeClients()
	return err
}

// Logs returns a real agent's output so far; "" on miniconsul.
func (c *Server) Logs() string {
	if c.agent == nil {
		return ""
	}
	return c.agent.host.logs.String()
}

// Binary returns the consul binary Consul would run: the path in
// EnvBin, else consul on PATH, else "".
func Binary() string {
	if p := os.Getenv(EnvBin); p != "" {
		return p
	}
	if p, err := exec.LookPath("consul"); err == nil {
		return p
	}
	return ""
}

// NewClient returns another api client with its own connections, closed
// by Close: a second process talking to the same server. Like the fake's
// own client, it passes every request through the locks.Gate of its
// context, as "consul <METHOD> <endpoint>" (see GateTransport), on
// miniconsul and on a real agent alike. On miniconsul its connections are
// in memory (miniconsul.Server.DialInMemory), not through Addr: clients
// of other programs, or behind a proxy, reach the server on Addr.
func (c *Server) NewClient() *api.Client {
	c.owner.Helper()
	client, err := c.newClient()
	if err != nil {
		c.owner.Fatalf("consulfake: %v", err)
	}
	return client
}

// newClient dials miniconsul in memory, so that no request of the fake's
// clients sits in the kernel.
func (c *Server) newClient() (*api.Client, error) {
	return c.newClientDialing(c.inMemory())
}

// newClientDialing is newClient with its connections dialed by dial (nil:
// TCP to Addr).
func (c *Server) newClientDialing(dial fakes.DialFunc) (*api.Client, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, DialContext: dial}
	client, err := api.NewClient(&api.Config{Address: c.addr, Scheme: "http",
		HttpClient: &http.Client{Transport: GateTransport(tr)}})
	if err != nil {
		return nil, fmt.Errorf("consul client for %s: %w", c.addr, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.transports = append(c.transports, tr)
	return client, nil
}

func (c *Server) closeClients() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tr := range c.transports {
		tr.CloseIdleConnections()
	}
}

// Client returns the fake's own client, gated as NewClient's are.
func (c *Server) Client() *api.Client { return c.client }

// Addr returns the server's HTTP host:port.
func (c *Server) Addr() string { return c.addr }

// Prefix returns a KV prefix unique to this fake ("lockproof-test-<8 hex>/").
// LockOptions passes it to locks.
func (c *Server) Prefix() string { return c.prefix }

// Clock returns the clock the server's time follows: the manual *Clock
// with ManualTime on miniconsul, else locks.SystemClock.
func (c *Server) Clock() locks.Clock { return fakeutil.ClockOf(c.clock) }

// LockOptions returns the options a test passes to a lock constructor so
// that the lock uses this fake's Prefix and Clock.
func (c *Server) LockOptions() []locks.Option { return fakeutil.LockOptions(c.prefix, c.clock) }

// Real reports whether the server is a real agent.
func (c *Server) Real() bool { return c.agent != nil }

// Miniconsul returns the miniconsul server, or nil on a real agent.
func (c *Server) Miniconsul() *miniconsul.Server { return c.mini }

// Startup returns how long the server took to start and be ready for
// sessions (for a real agent: leader elected, node registered).
func (c *Server) Startup() time.Duration { return c.startup }

// SessionTTLMin returns the shortest session TTL the server accepts.
func (c *Server) SessionTTLMin() time.Duration { return c.ttlMin }

// Advance moves time forward by d. On miniconsul with ManualTime it
// moves the manual clock (and with it session TTLs, lock-delays and
// blocking waits). A real agent's clock cannot be moved: with
// ManualTime, Advance sleeps d so that the same test runs on both,
// slower. Without ManualTime it fails the test.
func (c *Server) Advance(d time.Duration) {
	c.owner.Helper()
	if d < 0 {
		c.owner.Fatalf("consulfake: Advance(%v): time cannot move backwards", d)
	}
	switch {
	case c.clock != nil:
		c.clock.Advance(d)
	case c.agent != nil && c.agent.advanceSleeps:
		time.Sleep(d)
	default:
		c.owner.Fatalf("consulfake: Advance needs manual time: start the fake with consulfake.ManualTime(start)")
	}
}

// RequireMiniconsul skips the test on a real agent, saying why.
func (c *Server) RequireMiniconsul(why string) {
	c.owner.Helper()
	if c.mini == nil {
		c.owner.Skipf("consulfake: needs miniconsul (%s); use consulfake.ForceMiniconsul to run it", why)
	}
}

// ExpireSession invalidates session id now, as a TTL expiry would: its
// locks are released and lock-delay starts on them. On miniconsul it is
// InvalidateSession, and an unknown id is an error wrapping
// fakes.ErrNoSession; on a real agent an explicit destroy, which Consul
// handles by the same invalidation.
func (c *Server) ExpireSession(id string) error {
	if c.mini != nil {
		if !c.mini.InvalidateSession(id) {
			return fmt.Errorf("consulfake: expire consul session %s: %w", id, fakes.ErrNoSession)
		}
		return nil
	}
	if _, err := c.client.Session().Destroy(id, nil); err != nil {
		return fmt.Errorf("consulfake: destroying consul session %s: %w", id, err)
	}
	return nil
}

// ExpireLock ends the current lease of consullock's lock name, under this
// fake's Prefix, now: it expires the session that holds the lock's key
// (consullock.Key), as ExpireSession does. It fails, with an error wrapping
// ErrNoHolder, when nobody holds the lock.
func (c *Server) ExpireLock(ctx context.Context, name string) error {
	kv, _, err := c.client.KV().Get(layout.ConsulKey(c.prefix, name), (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("consulfake: expire consul lock %q: %w", name, err)
	}
	if kv == nil || kv.Session == "" {
		return fmt.Errorf("consulfake: expire consul lock %q: %w", name, fakes.ErrNoHolder)
	}
	err = c.ExpireSession(kv.Session)
	if errors.Is(err, fakes.ErrNoSession) { // it ended since the read: the lock is free
		return fmt.Errorf("consulfake: expire consul lock %q: %w", name, fakes.ErrNoHolder)
	}
	return err
}

// WaitBlocked waits (at most 10 s of wall time) until n blocking queries are
// parked on miniconsul: call it before Advance so that a client's wait has
// started. A real agent does not expose its parked queries: there it
// returns at once, and Advance sleeps.
func (c *Server) WaitBlocked(n int) {
	c.owner.Helper()
	if c.mini == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.mini.WaitBlocked(ctx, n); err != nil {
		c.owner.Fatalf("consulfake: %v (now %d)", err, c.mini.Blocked())
	}
}

// consulLogs collects a real agent's output; it is printed only if the
// test fails.
type consulLogs struct {
	mu  sync.Mutex
	buf []byte
}

// Write appends p to the buffer.
func (l *consulLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	return len(p), nil
}

// String returns everything written so far.
func (l *consulLogs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// pathBin is the consul binary this process put first on PATH: sdk/testutil
// runs `consul` from PATH, so one process can run one binary only.
var (
	pathMu  sync.Mutex
	pathBin string
)

// useConsulBinary makes `consul` on PATH resolve to bin, checked first: a
// missing file is reported as missing every time, and a second binary is
// refused instead of silently running the first one.
func useConsulBinary(bin string) error {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return fmt.Errorf("consul binary %s: %w", bin, err)
	}
	if filepath.Base(abs) != "consul" {
		return fmt.Errorf("consul binary %s: the file must be called consul (sdk/testutil runs consul from PATH)", bin)
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("consul binary: %w", err)
	}
	pathMu.Lock()
	defer pathMu.Unlock()
	switch pathBin {
	case abs:
		return nil
	case "":
		if err := os.Setenv("PATH", filepath.Dir(abs)+string(os.PathListSeparator)+os.Getenv("PATH")); err != nil {
			return fmt.Errorf("consul binary %s: putting it on PATH: %w", bin, err)
		}
		pathBin = abs
		return nil
	default:
		return fmt.Errorf("consul binary %s: this process already runs %s (sdk/testutil finds consul on PATH, which a process sets once)", abs, pathBin)
	}
}

// WaitParked waits (at most 10 s of wall time) until n blocking queries on
// key are parked on miniconsul with an index of at least index: clients
// that have seen the key at index and wait for its next change. On a real
// agent it returns at once (see WaitBlocked).
func (c *Server) WaitParked(key string, index uint64, n int) {
	c.owner.Helper()
	if c.mini == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.mini.WaitParked(ctx, key, index, n); err != nil {
		c.owner.Fatalf("consulfake: %v", err)
	}
}

var (
	_ fakes.Server                 = (*Server)(nil)
	_ fakes.ManualTimer            = (*Server)(nil)
	_ fakes.SessionExpirer[string] = (*Server)(nil)
)
