package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/consul/api"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/internal/zkrace"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/consullock"
	"github.com/lockproof/lockproof/locks/etcdlock"
	"github.com/lockproof/lockproof/locks/lockbench"
	"github.com/lockproof/lockproof/locks/lockbench/peers"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/locks/zklock"
)

// benchBackend is one backend, with lockproof's lock on it and its peers.
type benchBackend struct {
	name string
	// libs are the libraries measured, lockproof's first: the others'
	// ratios are to it.
	libs []string
	// rwLibs are what bench -rwlocks adds: lockproof's read-write lock's
	// writers and any peer's.
	rwLibs []string
	// unit names what requests counts: "cmds" or "reqs".
	unit string
	// start starts a fresh server (or connects to f's real one).
	start func(f benchFlags) (benchServer, error)
}

// benchServer is one started backend whose clients count what they send.
type benchServer interface {
	about() string
	// workers returns n workers of library lib on lock name, and a func
	// that closes what they opened.
	workers(lib, name string, n int) ([]lockbench.Worker, func(), error)
	// requests is how many requests the clients sent so far.
	requests() int64
	// wakeups is how many times the clients' waiters were woken so far (etcd
	// and ZooKeeper: watch events received; Consul: blocking queries
	// returned), or -1 when
	// the backend's locks do not wait on notifications.
	wakeups() int64
	close() error
}

var benchBackends = []benchBackend{
	{name: "redis", libs: []string{"lockproof", "redsync", "bsm"}, rwLibs: []string{libRWWriter},
		unit: "cmds", start: startRedisBench},
	{name: "etcd", libs: []string{"lockproof", "concurrency"}, rwLibs: []string{libRWWriter, libRecipeRWWriter},
		unit: "reqs", start: startEtcdBench},
	{name: "consul", libs: []string{"lockproof", "api.Lock"}, rwLibs: []string{libRWWriter},
		unit: "reqs", start: startConsulBench},
	{name: "zk", libs: []string{"lockproof", "zk.Lock"}, rwLibs: []string{libRWWriter},
		unit: "reqs", start: startZKBench},
}

func backendNamed(name string) (benchBackend, bool) {
	for _, b := range benchBackends {
		if b.name == name {
			return b, true
		}
	}
	return benchBackend{}, false
}

const benchTTL = 10 * time.Second

// libSemaphore is lockproof's semaphore of one permit on a backend, which
// bench -semaphores measures beside the backend's mutex: what the
// semaphore's generality costs where it does a mutex's work.
const libSemaphore = "semaphore(1)"

// libRWWriter is the writers' Locker of lockproof's read-write lock on a
// backend, and libRecipeRWWriter the write lock of etcd's
// experimental/recipes RWMutex, which bench -rwlocks measure beside the
// mutex: writers only, since the harness counts two holders at once as a
// broken lock.
const (
	libRWWriter       = "rwmutex(w)"
	libRecipeRWWriter = "recipe-rw(w)"
)

// --- Redis: miniredis or a real server (redisfake.Start), one counted
// go-redis client with go-redis's default options (not the fake's own
// clients, which are gated and tuned for stopped servers).

type redisBench struct {
	fake    *redisfake.Server
	client  *redis.Client
	counter *cmdCounter
}

func startRedisBench(f benchFlags) (benchServer, error) {
	fake, err := redisfake.Start(redisfake.At(f.redis)) // "": miniredis
	if err != nil {
		return nil, err
	}
	s := &redisBench{fake: fake, counter: &cmdCounter{}}
	s.client = redis.NewClient(&redis.Options{Addr: fake.Addr()})
	s.client.AddHook(s.counter)
	return s, nil
}

func (s *redisBench) about() string {
	if s.fake.Real() {
		return "Redis at " + s.fake.Addr()
	}
	return "miniredis (embedded)"
}

func (s *redisBench) workers(lib, name string, n int) ([]lockbench.Worker, func(), error) {
	switch lib {
	case "lockproof":
		l, err := redislock.New(s.client, name, locks.WithTTL(benchTTL))
		if err != nil {
			return nil, nil, err
		}
		return lockbench.Shared(l, n), func() {}, nil
	case libSemaphore:
		l, err := redislock.NewSemaphore(s.client, name, 1, locks.WithTTL(benchTTL))
		if err != nil {
			return nil, nil, err
		}
		return lockbench.Shared(l, n), func() {}, nil
	case libRWWriter:
		m, err := redislock.NewRWMutex(s.client, name, locks.WithTTL(benchTTL))
		if err != nil {
			return nil, nil, err
		}
		return lockbench.Shared(m.Locker(), n), func() {}, nil
	case "redsync":
		return peers.Redsync(s.client, name, benchTTL, n), func() {}, nil
	case "bsm":
		return peers.BSM(s.client, name, benchTTL, n), func() {}, nil
	}
	return nil, nil, fmt.Errorf("no library %q on redis", lib)
}

func (s *redisBench) requests() int64 { return s.counter.n.Load() }
func (s *redisBench) wakeups() int64  { return -1 }

func (s *redisBench) close() error {
	return errors.Join(s.client.Close(), s.fake.Close())
}

// cmdCounter counts the commands a go-redis client sends, a pipeline
// counting each command in it.
type cmdCounter struct{ n atomic.Int64 }

func (h *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// --- etcd: one embedded member (etcdfake.Start: no fsync), a counted
// client per worker.

type etcdBench struct {
	fake    *etcdfake.Server
	counter *peers.EtcdCounter
}

func startEtcdBench(benchFlags) (benchServer, error) {
	fake, err := etcdfake.Start()
	if err != nil {
		return nil, err
	}
	return &etcdBench{fake: fake, counter: &peers.EtcdCounter{}}, nil
}

func (s *etcdBench) about() string { return "etcd (embedded, one member, no fsync)" }

// workers gives each worker a client of its own, as W processes would
// have: lockproof a Locker each, concurrency a Session and Mutex each.
func (s *etcdBench) workers(lib, name string, n int) ([]lockbench.Worker, func(), error) {
	var (
		ws      []lockbench.Worker
		closers []func() error
	)
	done := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}
	for range n {
		c, err := clientv3.New(clientv3.Config{
			Endpoints: s.fake.Endpoints(), DialTimeout: 10 * time.Second,
			DialOptions: s.counter.DialOptions(), Logger: zap.NewNop(),
		})
		if err != nil {
			done()
			return nil, nil, err
		}
		closers = append(closers, c.Close)
		switch lib {
		case "lockproof", libSemaphore:
			newLocker := etcdlock.New
			if lib == libSemaphore {
				newLocker = func(c *clientv3.Client, name string, opts ...locks.Option) (*etcdlock.Locker, error) {
					return etcdlock.NewSemaphore(c, name, 1, opts...)
				}
			}
			l, err := newLocker(c, name, locks.WithTTL(benchTTL))
			if err != nil {
				done()
				return nil, nil, err
			}
			ws = append(ws, lockbench.FromLocker(l))
		case libRWWriter:
			m, err := etcdlock.NewRWMutex(c, name, locks.WithTTL(benchTTL))
			if err != nil {
				done()
				return nil, nil, err
			}
			ws = append(ws, lockbench.FromLocker(m.Locker()))
		case "concurrency", libRecipeRWWriter:
			peer := peers.EtcdMutex
			if lib == libRecipeRWWriter {
				peer = peers.EtcdRWMutexWriter
			}
			w, closeSession, err := peer(c, "lockproof-bench/"+name, benchTTL)
			if err != nil {
				done()
				return nil, nil, err
			}
			ws, closers = append(ws, w), append(closers, closeSession)
		default:
			done()
			return nil, nil, fmt.Errorf("no library %q on etcd", lib)
		}
	}
	return ws, done, nil
}

func (s *etcdBench) requests() int64 { return s.counter.Requests() }
func (s *etcdBench) wakeups() int64  { return s.counter.Events() }

func (s *etcdBench) close() error { return s.fake.Close() }

// --- Consul: miniconsul on the wall clock (consulfake.Start), one client
// counting its HTTP requests (blocking queries included).

type consulBench struct {
	fake   *consulfake.Server
	tr     *http.Transport
	count  *countingTransport
	client *api.Client
}

func startConsulBench(benchFlags) (benchServer, error) {
	fake, err := consulfake.Start(consulfake.ForceMiniconsul())
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	count := &countingTransport{next: tr}
	client, err := api.NewClient(&api.Config{Address: fake.Addr(), HttpClient: &http.Client{Transport: count}})
	if err != nil {
		return nil, errors.Join(err, fake.Close())
	}
	return &consulBench{fake: fake, tr: tr, count: count, client: client}, nil
}

func (s *consulBench) about() string { return "miniconsul (embedded, wall clock)" }

// workers gives lockproof a Locker per worker, as W processes would have,
// and api.Lock one Lock per worker; all on the one client.
func (s *consulBench) workers(lib, name string, n int) ([]lockbench.Worker, func(), error) {
	key := "lockproof-bench/" + name
	switch lib {
	case "lockproof", libSemaphore, libRWWriter:
		opts := []locks.Option{locks.WithTTL(benchTTL), locks.WithPrefix("")}
		ws := make([]lockbench.Worker, n)
		for i := range ws {
			var l locks.Locker
			var err error
			switch lib {
			case libSemaphore:
				l, err = consullock.NewSemaphore(s.client, key, 1, opts...)
			case libRWWriter:
				var m *consullock.RWMutex
				if m, err = consullock.NewRWMutex(s.client, key, opts...); err == nil {
					l = m.Locker()
				}
			default:
				l, err = consullock.New(s.client, key, opts...)
			}
			if err != nil {
				return nil, nil, err
			}
			ws[i] = lockbench.FromLocker(l)
		}
		return ws, func() {}, nil
	case "api.Lock":
		ws, err := peers.ConsulLock(s.client, key, benchTTL, n)
		return ws, func() {}, err
	}
	return nil, nil, fmt.Errorf("no library %q on consul", lib)
}

func (s *consulBench) requests() int64 { return s.count.n.Load() }
func (s *consulBench) wakeups() int64  { return s.count.woken.Load() }

func (s *consulBench) close() error {
	s.tr.CloseIdleConnections()
	return s.fake.Close()
}

// countingTransport counts the HTTP requests of a client, and the
// blocking queries (those with an index) that returned: each is a waiter
// woken, by a change of the key or at the end of its wait.
type countingTransport struct {
	next     http.RoundTripper
	n, woken atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	resp, err := c.next.RoundTrip(r)
	if index := r.URL.Query().Get("index"); err == nil && index != "" && index != "0" {
		c.woken.Add(1)
	}
	return resp, err
}

// --- ZooKeeper: minizk or a real server (-zk) through zkfake.Start
// (wall clock), a connection and so a session per worker, counted at the
// dialer.

// zkSession bounds the wait for a new connection's session.
const zkSession = 10 * time.Second

type zkBench struct {
	fake    *zkfake.Server
	addr    string
	prefix  string // every lock node of this server's runs is below it: the fake's Prefix, deleted by its Close
	counter *peers.ZKCounter
}

func startZKBench(f benchFlags) (benchServer, error) {
	fake, err := zkfake.Start(zkfake.At(f.zk)) // "": minizk
	if err != nil {
		return nil, err
	}
	return &zkBench{fake: fake, addr: fake.Addr(), prefix: fake.Prefix(), counter: &peers.ZKCounter{}}, nil
}

func (s *zkBench) about() string {
	if s.fake.Real() {
		return "ZooKeeper at " + s.addr
	}
	return "minizk (in-process, wall clock)"
}

// connect opens a counted connection with session timeout benchTTL and
// waits for its session.
func (s *zkBench) connect() (*zk.Conn, error) {
	return zkrace.Connect([]string{s.addr}, benchTTL, zkSession, nil, zk.WithDialer(s.counter.Dial), zk.WithLogger(zkQuiet{}))
}

// workers gives each worker a connection of its own, as W processes would
// have: lockproof a Locker each, zk.Lock a Lock each, on the same node path.
func (s *zkBench) workers(lib, name string, n int) ([]lockbench.Worker, func(), error) {
	var conns []*zk.Conn
	done := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	ws := make([]lockbench.Worker, 0, n)
	for range n {
		conn, err := s.connect()
		if err != nil {
			done()
			return nil, nil, err
		}
		conns = append(conns, conn)
		switch lib {
		case "lockproof", libSemaphore:
			newLocker := zklock.New
			if lib == libSemaphore {
				newLocker = func(conn *zk.Conn, name string, opts ...locks.Option) (*zklock.Locker, error) {
					return zklock.NewSemaphore(conn, name, 1, opts...)
				}
			}
			l, err := newLocker(conn, name, locks.WithTTL(benchTTL), locks.WithPrefix(s.prefix))
			if err != nil {
				done()
				return nil, nil, err
			}
			ws = append(ws, lockbench.FromLocker(l))
		case libRWWriter:
			m, err := zklock.NewRWMutex(conn, name, locks.WithTTL(benchTTL), locks.WithPrefix(s.prefix))
			if err != nil {
				done()
				return nil, nil, err
			}
			ws = append(ws, lockbench.FromLocker(m.Locker()))
		case "zk.Lock":
			ws = append(ws, peers.ZKLock(conn, s.prefix+"/"+name))
		default:
			done()
			return nil, nil, fmt.Errorf("no library %q on zk", lib)
		}
	}
	return ws, done, nil
}

func (s *zkBench) requests() int64 { return s.counter.Requests() }
func (s *zkBench) wakeups() int64  { return s.counter.Events() }

// close stops minizk; on a real server it deletes the runs' nodes (the
// fake's Prefix).
func (s *zkBench) close() error { return s.fake.Close() }

// zkQuiet drops go-zookeeper's connection log lines.
type zkQuiet struct{}

// Printf discards the line.
func (zkQuiet) Printf(string, ...any) {}

// probeZK checks, before any work, that addr takes TCP connections and
// grants a ZooKeeper session (zkfake.Start does both).
func probeZK(addr string) error {
	z, err := zkfake.Start(zkfake.At(addr))
	if err != nil {
		return err
	}
	return z.Close()
}
