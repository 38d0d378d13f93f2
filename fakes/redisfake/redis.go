package redisfake

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/fakeutil"
	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/internal/memnet"
	"github.com/lockproof/lockproof/locks"
)

// EnvAddr names the environment variable that points Redis at a real
// server (host:port) instead of miniredis. Tests share that server; each fake
// works under its own Prefix and deletes its keys at cleanup.
const EnvAddr = "LOCKPROOF_REDIS_ADDR"

// Option configures Start and StartCluster (and Redis and
// RedisCluster).
type Option func(*redisConfig)

type redisConfig struct {
	manual    bool
	start     time.Time
	forceMini bool
	addr      string   // RedisAt
	addrs     []string // RedisNodesAt
}

// ManualTime puts the fake in manual mode: its Clock is a *Clock reading
// start that moves only with Advance, and the backend's TTLs and TIME move
// with it. Default: real-time mode, where Clock is locks.SystemClock and TTLs
// run on the wall clock.
func ManualTime(start time.Time) Option {
	return func(c *redisConfig) { c.manual, c.start = true, start }
}

// At makes Start use the real server at addr (host:port) instead
// of miniredis. The fake works under its own Prefix there and deletes its
// keys at Close. Default (and with addr ""): miniredis. StartCluster
// ignores it (one server cannot stand for independent nodes: see
// NodesAt).
func At(addr string) Option {
	return func(c *redisConfig) { c.addr = addr }
}

// NodesAt makes StartCluster use the real, independent servers at
// addrs (host:port each, no address twice; the first n are used) instead of
// miniredis. Default: miniredis. Start ignores it.
func NodesAt(addrs ...string) Option {
	return func(c *redisConfig) { c.addrs = append([]string(nil), addrs...) }
}

// ForceMiniredis uses miniredis even when a real server is given, by
// At or NodesAt or, for Redis and RedisCluster, by EnvAddr or
// EnvAddrs. Default: a real server when one is given. Use it for tests
// that need Stop, Restart or exact manual time.
func ForceMiniredis() Option {
	return func(c *redisConfig) { c.forceMini = true }
}

func newRedisConfig(opts []Option) redisConfig {
	var c redisConfig
	fakeutil.ApplyOptions(&c, opts)
	if c.forceMini {
		c.addr, c.addrs = "", nil
	}
	return c
}

// newClock returns the manual clock of the configuration, or nil in
// real-time mode.
func (c redisConfig) newClock() *fakes.Clock {
	if !c.manual {
		return nil
	}
	return fakes.NewClock(c.start)
}

// Server is one Redis backend: miniredis on a loopback port, or a real
// server (At). Build it with Start, or Redis for a test (or as a
// node of a Nodes); Close closes everything it opened.
//
// In real-time mode miniredis counts TTLs down on the wall clock (its
// ClockTTL mode, which expires keys as any command touches the server): a
// key is gone for every command sent once its TTL has passed and present
// for every command sent before, as on Redis. It never expires a key early,
// which is the direction that matters for a lock: an early expiry would let
// a second owner in while the first still holds a valid lease. (Calling
// FastForward from a ticker instead would shorten the TTL of a key set
// between two ticks by up to one tick.) Like Redis, it follows the wall
// clock, so a step of the system clock moves TTLs too.
//
// In manual mode the TTLs and TIME stand still until Advance.
//
// A control that cannot go on (Stop on a real server, Advance without
// manual time) fails the test of a server from Redis, and panics on one
// from Start.
type Server struct {
	owner   fakeutil.Owner
	prefix  string
	clock   *fakes.Clock // nil in real-time mode
	inGroup bool         // a RedisCluster node: the clock is shared
	index   int          // the node's index in its RedisCluster; 0 for Redis
	addr    string
	mini    *miniredis.Miniredis // nil on a real server
	client  *redis.Client
	closed  atomic.Bool

	mu      sync.Mutex
	clients []*redis.Client
	// dialMu orders in-memory dials (dialInMemory) with stopping and
	// starting miniredis; stopped is written under both locks.
	dialMu   sync.Mutex
	stopped  bool
	pastCmds int // commands processed by earlier runs of a restarted miniredis
	ownCmds  int // commands sent by the fake itself, not counted
}

// Start starts miniredis on a port chosen by the kernel, or connects
// to the real server given by At (unless ForceMiniredis), for a
// program that has no test. It returns an error if the server cannot be
// started or does not answer PING. Close stops it.
func Start(opts ...Option) (*Server, error) {
	cfg := newRedisConfig(opts)
	return newNode(cfg.addr, newPrefix(), cfg.newClock(), false, 0)
}

// New starts a backend for t with Start: miniredis, or the real
// server named by EnvAddr (read here, as a At before opts) unless
// ForceMiniredis is given. It fails the test if the backend cannot be
// started or reached, and closes it at t's cleanup.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	return fakeutil.ForTest(t, "redisfake.New", EnvAddr, opts, At,
		func(o []Option) string { return newRedisConfig(o).addr }, Start,
		func(s *Server, tb testing.TB) { s.owner.Own(tb) })
}

// newPrefix returns a key prefix unique to one fake.
func newPrefix() string { return "lockproof-test-" + locks.NewOwner()[:8] + ":" }

// newNode starts miniredis (addr == "") or connects to the real server at
// addr, with the given prefix and clock (nil: real time), as node index of
// its group.
func newNode(addr, prefix string, clock *fakes.Clock, inGroup bool, index int) (*Server, error) {
	QuietClientLogs()
	r := &Server{prefix: prefix, clock: clock, inGroup: inGroup, index: index, addr: addr}
	if addr == "" {
		if err := r.startMiniredis(); err != nil {
			return nil, err
		}
	}
	r.client = r.newClient()
	r.clients = append(r.clients, r.client)
	if r.mini == nil {
		if err := r.pingReal(); err != nil {
			r.closeAll()
			return nil, err
		}
	}
	return r, nil
}

// QuietClientLogs installs, once per process, a go-redis logger that drops
// the lines go-redis prints to stderr for a failed dial and for a Sentinel
// master lookup: with stopped servers and failovers those events are the
// point of a test or a check, and the command errors report what matters.
// go-redis has one logger per process, so this replaces any logger set
// before; its other messages still go to stderr. Every fake calls it.
func QuietClientLogs() {
	quietClientLogs.Do(func() {
		redis.SetLogger(logging.NewBlacklistLogger([]string{"failed to dial", "sentinel: "}))
	})
}

var quietClientLogs sync.Once

func (r *Server) startMiniredis() error {
	m := miniredis.NewMiniRedis()
	if r.clock != nil {
		m.SetTime(r.clock.Now())
	} else {
		m.ClockTTL(true)
	}
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return fmt.Errorf("cannot start miniredis on a loopback port: %w", err)
	}
	if err := registerMiniredisConfig(m); err != nil {
		m.Close()
		return fmt.Errorf("miniredis: CONFIG: %w", err)
	}
	r.mini, r.addr = m, m.Addr()
	return nil
}

// clientPoolSize bounds each client's connections. A go-redis pool stops
// dialing after as many failed dials as its size, failing fast and probing
// once a second from a goroutine of its own: a client of a restarted server
// would stay down for up to a second, and the probe would outlive the test.
// One large pool (pipelines share it, rather than a 10-connection pool of
// their own) keeps a client of a stopped server reporting each failure and
// reconnecting as soon as the server is back.
const clientPoolSize = 1024

// clientOptions are those of every client the fake hands out: go-redis
// defaults, command retries included, except that the pool dials once per
// attempt (a refused loopback dial is immediate and final) and retries back
// off by 1-4 ms instead of 10-1000 ms, so a command to a stopped server
// fails in a few milliseconds rather than in a tenth of a second.
//
// A client of miniredis in memory retries at once. go-redis still retries
// a command whose dial was refused, or whose pooled connection a stop
// closed; a back-off sleeps on a timer of wall time, and while it does
// every goroutine stands blocked, which the property suite's scheduler
// takes for quiescence (see propertytest.Backend.InProcess): the command
// would go on by itself after the scheduler moved on, at a different step
// in each replay of a seed. Waiting buys nothing there anyway: the
// server's state changes only when the test acts.
func (r *Server) clientOptions() *redis.Options {
	minBackoff, maxBackoff := time.Millisecond, 4*time.Millisecond
	if r.mini != nil {
		// -1: no back-off (0 is go-redis's default). The zero timer
		// go-redis still waits on has fired by then: the runtime runs an
		// expired timer's channel send in the receive, without blocking.
		minBackoff, maxBackoff = -1, -1
	}
	return &redis.Options{
		Addr:             r.addr,
		Dialer:           r.inMemory(),
		DisableIdentity:  true,
		DialerRetries:    1,
		MinRetryBackoff:  minBackoff,
		MaxRetryBackoff:  maxBackoff,
		PoolSize:         clientPoolSize,
		PipelinePoolSize: -1, // pipelines on the main pool
	}
}

// dialInMemory connects a client to miniredis without a socket: the
// server serves one end of an in-memory connection (internal/memnet), so
// a request in flight is a runnable goroutine, which the property suite's
// scheduler sees (see propertytest.Backend.InProcess). A stopped server
// refuses the dial as a closed port would.
func (r *Server) dialInMemory(ctx context.Context, _, _ string) (net.Conn, error) {
	r.dialMu.Lock()
	defer r.dialMu.Unlock()
	srv := r.mini.Server()
	if r.stopped || r.closed.Load() || srv == nil {
		return nil, memnet.Refused(r.addr)
	}
	client, server := memnet.Pipe(memnet.Addr("client of "+r.addr), memnet.Addr(r.addr))
	srv.ServeConn(server)
	return client, nil
}

// newClient returns a client with clientOptions and the gate hook.
func (r *Server) newClient() *redis.Client {
	c := redis.NewClient(r.clientOptions())
	Gate(c, r.GateLabel())
	return c
}

// GateLabel is the label of the requests of this server's clients as a
// locks.Gate sees them: "redis node <i>", i the node's index in its
// RedisCluster, 0 for a single Redis. Pass it to Gate for a client of
// the server built elsewhere (through a proxy, say).
func (r *Server) GateLabel() string { return fmt.Sprintf("redis node %d", r.index) }

// Close closes every client the server handed out and stops miniredis; on
// a real server it first deletes every key under Prefix, and reports a
// failure to. Closing twice does nothing.
func (r *Server) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	var err error
	if r.mini == nil {
		if derr := r.deletePrefix(); derr != nil {
			err = fmt.Errorf("deleting keys %s* on %s: %w", r.prefix, r.addr, derr)
		}
	}
	r.closeAll()
	return err
}

// closeAll closes every client, then the miniredis server.
func (r *Server) closeAll() {
	r.mu.Lock()
	clients := r.clients
	r.clients = nil
	r.mu.Unlock()
	for _, c := range clients {
		_ = c.Close() // closing a client only fails if it was closed already
	}
	if r.mini != nil {
		r.dialMu.Lock() // no in-memory dial while the server closes
		r.mini.Close()
		r.dialMu.Unlock()
	}
}

// Client returns the fake's own client, ready to use and closed by Close.
// It is gated as NewClient's are.
func (r *Server) Client() redis.UniversalClient { return r.client }

// NewClient returns another client with its own connection pool, closed by
// Close: a second process talking to the same server. Like the fake's own
// client, it passes its commands through the locks.Gate of their context
// (see GateHook), as "redis node <i>: <COMMAND>".
func (r *Server) NewClient() *redis.Client { return r.keep(r.newClient()) }

// keep records c, to be closed by Close, and returns it.
func (r *Server) keep(c *redis.Client) *redis.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients = append(r.clients, c)
	return c
}

// Addr returns the server's host:port.
func (r *Server) Addr() string { return r.addr }

// Prefix returns the key prefix unique to this fake ("lockproof-test-<8 hex>:").
// Pass it to locks with locks.WithPrefix (LockOptions does).
func (r *Server) Prefix() string { return r.prefix }

// Clock returns the clock the backend's TTLs follow: locks.SystemClock in
// real-time mode, the manual *Clock in manual mode.
func (r *Server) Clock() locks.Clock { return fakeutil.ClockOf(r.clock) }

// LockOptions returns the options a test passes to a lock constructor so the
// lock uses this fake's Prefix and Clock.
func (r *Server) LockOptions() []locks.Option { return fakeutil.LockOptions(r.prefix, r.clock) }

// Miniredis returns the miniredis server, or nil on a real server.
func (r *Server) Miniredis() *miniredis.Miniredis { return r.mini }

// Real reports whether the fake talks to a real server.
func (r *Server) Real() bool { return r.mini == nil }

// Advance moves time forward by d, in manual mode only: first the backend
// (TTLs run down by d, keys that reach zero expire, TIME reads the new time),
// then the Clock, so a timer that fires already finds its keys expired.
//
// On miniredis this is exact. A real server cannot stop its own clock: Advance
// shortens the TTL of every key under the prefix by d (whole milliseconds),
// deleting those it would run out, while the server keeps counting down in
// real time as well; TIME keeps the server's time.
func (r *Server) Advance(d time.Duration) {
	r.owner.Helper()
	if r.inGroup {
		r.owner.Fatalf("redisfake: Advance on one node of a redisfake.Nodes would move the clock shared by all nodes; " +
			"use Nodes.Advance (or Miniredis().FastForward to skew one node)")
	}
	advance(r.owner, r.clock, []*Server{r}, d)
}

// advance moves the backends of nodes, then clock, forward by d.
func advance(t fakeutil.Owner, clock *fakes.Clock, nodes []*Server, d time.Duration) {
	t.Helper()
	if clock == nil {
		t.Fatalf("redisfake: Advance needs manual time: start the fake with redisfake.ManualTime(start)")
	}
	if d < 0 {
		t.Fatalf("redisfake: Advance(%v): time cannot move backwards", d)
	}
	now := clock.Now().Add(d)
	for _, n := range nodes {
		n.advanceBackend(now, d)
	}
	clock.Advance(d)
}

// advanceBackend runs the backend's TTLs down by d and sets its time to now.
func (r *Server) advanceBackend(now time.Time, d time.Duration) {
	r.owner.Helper()
	if r.mini == nil {
		if err := r.advanceReal(d); err != nil {
			r.owner.Fatalf("redisfake: Advance(%v) on %s: %v", d, r.addr, err)
		}
		return
	}
	r.mini.SetTime(now)
	r.mini.FastForward(d)
}

// Stop shuts the server down: clients get connection errors until Restart.
// Stopping a stopped server does nothing. miniredis only: on a real server
// the test is skipped.
func (r *Server) Stop() {
	r.owner.Helper()
	r.requireMiniredis("Stop")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
}

func (r *Server) stopLocked() {
	if r.stopped {
		return
	}
	r.pastCmds += r.mini.CommandCount()
	r.dialMu.Lock()
	r.mini.Close()
	r.stopped = true
	r.dialMu.Unlock()
}

// Restart stops the server if it runs and starts it again on the same
// address, with its keys (keepData) or empty, as a restart without
// persistence. Either way the script cache is emptied, as on a restarted
// Redis, so EVALSHA answers NOSCRIPT. Keys' TTLs keep running while the
// server is down, in the mode's time. Clients reconnect by themselves.
// miniredis only: on a real server the test is skipped.
func (r *Server) Restart(keepData bool) {
	r.owner.Helper()
	r.requireMiniredis("Restart")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
	if !keepData {
		r.mini.FlushAll()
	}
	// miniredis cancels the context of its blocking commands at Close and
	// never renews it: without a fresh one, BLPOP and the like would never
	// answer on the restarted server.
	r.mini.Lock()
	r.mini.Ctx, r.mini.CtxCancel = context.WithCancel(context.Background())
	r.mini.Unlock()
	r.dialMu.Lock()
	err := r.mini.Restart()
	if err == nil {
		err = registerMiniredisConfig(r.mini)
	}
	r.stopped = err != nil
	r.dialMu.Unlock()
	if err != nil {
		r.owner.Fatalf("redisfake: cannot restart miniredis on %s: %v", r.addr, err)
	}
	if err := r.flushScripts(); err != nil {
		r.owner.Fatalf("redisfake: restart of %s: emptying the script cache: %v", r.addr, err)
	}
}

// flushScripts sends SCRIPT FLUSH on a connection of its own, not counted by
// CommandCount.
func (r *Server) flushScripts() error {
	c := r.newClient()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	before := r.mini.CommandCount()
	err := c.ScriptFlush(ctx).Err()
	r.ownCmds += r.mini.CommandCount() - before
	return err
}

func (r *Server) requireMiniredis(what string) {
	r.owner.Helper()
	if r.mini == nil {
		env := EnvAddr
		if r.inGroup {
			env = EnvAddrs
		}
		r.owner.Skipf("redisfake: %s needs miniredis: cannot stop a real server from a test (unset %s, or use redisfake.ForceMiniredis)",
			what, env)
	}
}

// CommandCount returns how many commands the server has processed, over
// restarts, not counting those the fake sent itself. On a real server it is
// the server's total_commands_processed: every client's commands since the
// server started, and it fails the test if INFO cannot be read.
func (r *Server) CommandCount() int {
	r.owner.Helper()
	if r.mini == nil {
		return r.realCommandCount()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.pastCmds - r.ownCmds
	if !r.stopped {
		n += r.mini.CommandCount()
	}
	return n
}

// ExpireLock ends the current lease of lock name, under this fake's
// Prefix, now: it deletes the lock's key (redislock.Key, the key of
// redislock and redlock alike), as its expiry would. The fencing counter
// and the waiters' queue stay. It fails, with an error wrapping
// ErrNoHolder, when no lease is held.
func (r *Server) ExpireLock(ctx context.Context, name string) error {
	ok, err := r.expireKey(ctx, name)
	if err != nil {
		return fmt.Errorf("redisfake: expire lock %q: %w", name, err)
	}
	if !ok {
		return fmt.Errorf("redisfake: expire lock %q: %w", name, fakes.ErrNoHolder)
	}
	return nil
}

// expireKey deletes the key of lock name and says whether it existed.
func (r *Server) expireKey(ctx context.Context, name string) (bool, error) {
	n, err := r.client.Del(ctx, layout.RedisKey(r.prefix, name)).Result()
	return n == 1, err
}
