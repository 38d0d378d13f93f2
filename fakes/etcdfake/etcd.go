package etcdfake

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/fakeutil"
	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/locks"
)

// EnvEndpoints names the environment variable that points Etcd and
// EtcdCluster at a real etcd cluster instead of embedded members:
// comma-separated client URLs ("http://127.0.0.1:2379"). Tests share that
// cluster; each fake works under its own Prefix and deletes its keys at
// cleanup.
const EnvEndpoints = "LOCKPROOF_ETCD_ENDPOINTS"

// etcdTimeout bounds each housekeeping call the fake makes (deleting keys,
// revoking and listing leases); etcdReadyCheck the first request, which
// tells whether the cluster answers at all.
const (
	etcdTimeout    = 10 * time.Second
	etcdReadyCheck = 3 * time.Second
)

// Option configures Start and StartCluster (and Etcd and
// EtcdCluster).
type Option func(*etcdConfig)

type etcdConfig struct {
	endpoints     []string
	forceEmbedded bool
}

// At makes the fake use the real etcd cluster at endpoints (client
// URLs, "http://127.0.0.1:2379") instead of embedded members. The fake
// works under its own Prefix there and deletes its keys at Close. Default
// (and with no endpoints): embedded members.
func At(endpoints ...string) Option {
	return func(c *etcdConfig) { c.endpoints = append([]string(nil), endpoints...) }
}

// ForceEmbedded uses embedded members even when a real cluster is
// given, by At or, for Etcd and EtcdCluster, by EnvEndpoints.
// Default: a real cluster when one is given. Use it for tests that need
// Stop, Restart or the members themselves.
func ForceEmbedded() Option { return func(c *etcdConfig) { c.forceEmbedded = true } }

func newEtcdConfig(opts []Option) etcdConfig {
	var c etcdConfig
	fakeutil.ApplyOptions(&c, opts)
	if c.forceEmbedded {
		c.endpoints = nil
	}
	return c
}

// Server is one etcd cluster: embedded members (see Start and
// StartCluster) or a real cluster (At). Close closes everything it
// opened: first every client it handed out, then the members, so that no
// open stream holds up a member's shutdown, then their data directory.
//
// A control that cannot go on (Stop on a real cluster, a member index out
// of range) fails the test of a server from Etcd or EtcdCluster, and
// panics on one from Start or StartCluster.
type Server struct {
	owner   fakeutil.Owner
	prefix  string
	logs    *logBuffer
	log     *zap.Logger
	dir     string        // the members' data, removed by Close
	members []*etcdMember // nil on a real cluster
	real    []string      // the endpoints of a real cluster
	startup time.Duration
	client  *clientv3.Client

	answered bool // the cluster answered once: Close cleans a real one up
	closed   atomic.Bool

	mu      sync.Mutex
	clients []*clientv3.Client
}

// Start starts a one-member etcd embedded in the process (data in a
// temporary directory, loopback ports chosen by the kernel, no fsync), or
// connects to the real cluster given by At (unless ForceEmbedded),
// for a program that has no test. It returns an error if the cluster
// cannot be started or does not answer. The member's logs are kept in
// memory (Logs). Close stops it.
func Start(opts ...Option) (*Server, error) {
	return startEtcd(1, newEtcdConfig(opts))
}

// StartCluster starts an n-member etcd cluster, every member embedded
// in the process on its own loopback client and peer ports, or connects to
// the real cluster given by At if it lists at least n distinct
// endpoints (one per member; an error otherwise). Stop and Restart fail a
// member and bring it back. Close stops them.
func StartCluster(n int, opts ...Option) (*Server, error) {
	if n < 1 {
		return nil, fmt.Errorf("etcdfake: an etcd cluster needs at least one member, got %d", n)
	}
	return startEtcd(n, newEtcdConfig(opts))
}

// New starts a one-member etcd for t with Start, or connects to the
// real cluster named by EnvEndpoints (read here, as an At before
// opts) unless ForceEmbedded is given. It fails the test if the
// cluster cannot be started or reached, closes it at t's cleanup, and
// prints the members' logs if the test failed.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	return etcdFor(t, "etcdfake.New", 1, opts)
}

// NewCluster starts an n-member etcd cluster for t with
// StartCluster, every member embedded in the test process. With
// EnvEndpoints set (and no ForceEmbedded) it uses that real
// cluster instead if it lists at least n endpoints, and skips the test
// otherwise. It closes the cluster at t's cleanup.
func NewCluster(t testing.TB, n int, opts ...Option) *Server {
	t.Helper()
	return etcdFor(t, "etcdfake.NewCluster", n, opts)
}

// etcdFor is Etcd and EtcdCluster.
func etcdFor(t testing.TB, helper string, n int, opts []Option) *Server {
	t.Helper()
	s := fakeutil.ForTest(t, helper, EnvEndpoints, opts, func(v string) Option { return At(fakeutil.ListOf(v)...) },
		func(o []Option) string { return strings.Join(newEtcdConfig(o).endpoints, ",") },
		func(o ...Option) (*Server, error) { return StartCluster(n, o...) },
		func(s *Server, tb testing.TB) { s.owner.Own(tb) })
	if s == nil {
		return nil
	}
	t.Cleanup(func() { // registered after Close's cleanup: runs before it
		if t.Failed() {
			t.Logf("etcdfake: etcd logs of this test:\n%s", s.Logs())
		}
	})
	return s
}

func startEtcd(n int, cfg etcdConfig) (*Server, error) {
	logs := &logBuffer{}
	s := &Server{prefix: "lockproof-test-" + locks.NewOwner()[:8] + "/", logs: logs, log: logs.logger()}
	if len(cfg.endpoints) > 0 {
		eps, err := etcdEndpoints(cfg.endpoints, n)
		if err != nil {
			return nil, err
		}
		s.real = eps
	} else {
		began := time.Now()
		if err := s.startMembers(n); err != nil {
			return nil, err
		}
		s.startup = time.Since(began)
	}
	c, err := s.newClient(s.clientConfig(nil))
	if err == nil {
		s.client = c
		err = s.checkReady()
	}
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	s.answered = true
	return s, nil
}

// Close closes every client the fake handed out, then stops the embedded
// members and removes their data; on a real cluster it first deletes every
// key under Prefix, and reports a failure to. Closing twice does nothing.
func (s *Server) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	var errs []error
	if s.members == nil && s.answered {
		errs = append(errs, s.deleteKeys())
	}
	s.closeClients()
	s.stopMembers()
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}

// Logs returns what the embedded members and the fake's clients logged
// (info level and above), kept in memory up to 4 MiB.
func (s *Server) Logs() string { return s.logs.String() }

// etcdEndpoints checks the endpoints of a real cluster: at least n
// distinct ones (an error wrapping errTooFewServers otherwise). Repeats
// are dropped.
func etcdEndpoints(endpoints []string, n int) ([]string, error) {
	var eps []string
	seen := map[string]bool{}
	for _, e := range endpoints {
		if e == "" || seen[e] {
			continue
		}
		seen[e] = true
		eps = append(eps, e)
	}
	if len(eps) < n {
		return nil, fmt.Errorf("an etcd cluster of %d members needed, %d endpoints given: %w", n, len(eps), fakeutil.ErrTooFewServers)
	}
	return eps, nil
}

// checkReady returns an error unless the cluster answers a linearizable
// read.
func (s *Server) checkReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), etcdReadyCheck)
	defer cancel()
	if _, err := s.client.Get(ctx, s.prefix+"ready"); err != nil {
		if s.members == nil {
			return fmt.Errorf("etcd at %s does not answer: %w", strings.Join(s.real, ","), err)
		}
		return fmt.Errorf("the embedded etcd does not answer: %w", err)
	}
	return nil
}

// clientConfig is the configuration of every client the fake hands out:
// all members' endpoints, logs into the fake's buffer, the gate's
// interceptors (GateDialOptions), require-leader (RequireLeaderDialOptions)
// and then dialOpts.
func (s *Server) clientConfig(dialOpts []grpc.DialOption) clientv3.Config {
	return clientv3.Config{
		Endpoints:   s.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      s.log.Named("client"),
		DialOptions: slices.Concat(GateDialOptions(), RequireLeaderDialOptions(), dialOpts),
	}
}

// Client returns the fake's own client, ready to use and closed by Close.
// It knows every member's endpoint and fails over between them. Its
// requests pass through the locks.Gate of their context, as NewClient's do.
func (s *Server) Client() *clientv3.Client { return s.client }

// NewClient returns another client of every member, with its own
// connections and the given extra gRPC dial options (interceptors, for
// instance), closed by Close before the members stop: a second process.
// Its requests pass through the locks.Gate of their context as
// "etcd <Service>/<Method>" (see GateDialOptions); interceptors in
// dialOpts run inside the gate's. clientv3.New only fails on a bad
// configuration: that fails the test (or panics, without one).
func (s *Server) NewClient(dialOpts ...grpc.DialOption) *clientv3.Client {
	s.owner.Helper()
	c, err := s.newClient(s.clientConfig(dialOpts))
	if err != nil {
		s.owner.Fatalf("etcdfake: %v", err)
	}
	return c
}

// MemberClient returns a client of member i alone, closed by Close.
func (s *Server) MemberClient(i int) *clientv3.Client {
	s.owner.Helper()
	cfg := s.clientConfig(nil)
	cfg.Endpoints = []string{s.Endpoint(i)}
	c, err := s.newClient(cfg)
	if err != nil {
		s.owner.Fatalf("etcdfake: %v", err)
	}
	return c
}

func (s *Server) newClient(cfg clientv3.Config) (*clientv3.Client, error) {
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client of %v: %w", cfg.Endpoints, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients = append(s.clients, c)
	return c, nil
}

// closeClients closes every client handed out.
func (s *Server) closeClients() {
	s.mu.Lock()
	clients := s.clients
	s.clients = nil
	s.mu.Unlock()
	for _, c := range clients {
		_ = c.Close() // only fails for a client closed already
	}
}

// Endpoints returns the client URL of every member, in member order (on a
// real cluster, those of EnvEndpoints).
func (s *Server) Endpoints() []string {
	if s.members == nil {
		return append([]string(nil), s.real...)
	}
	eps := make([]string, len(s.members))
	for i, m := range s.members {
		eps[i] = m.clientURL.String()
	}
	return eps
}

// Endpoint returns member i's client URL, failing the test if there is no
// member i.
func (s *Server) Endpoint(i int) string {
	s.owner.Helper()
	eps := s.Endpoints()
	if i < 0 || i >= len(eps) {
		s.owner.Fatalf("etcdfake: no etcd member %d in a cluster of %d", i, len(eps))
	}
	return eps[i]
}

// Members returns the number of members (on a real cluster, of endpoints).
func (s *Server) Members() int { return len(s.Endpoints()) }

// Real reports whether the fake talks to a real cluster.
func (s *Server) Real() bool { return s.members == nil }

// StartupTime returns how long the embedded members took to start and elect
// a leader; zero on a real cluster.
func (s *Server) StartupTime() time.Duration { return s.startup }

// Prefix returns the key prefix unique to this fake ("lockproof-test-<8
// hex>/"). Pass it to locks with locks.WithPrefix (LockOptions does).
func (s *Server) Prefix() string { return s.prefix }

// LockOptions returns the options a test passes to a lock constructor so the
// lock works under this fake's Prefix. etcd's leases run on the server's
// wall clock, so there is no manual time for etcd: revoke a lease
// (RevokeLease) to make it expire now.
func (s *Server) LockOptions() []locks.Option {
	return []locks.Option{locks.WithPrefix(s.prefix)}
}

// RevokeLease revokes lease id now, as its expiry would: the server deletes
// every key attached to it at once.
func (s *Server) RevokeLease(ctx context.Context, id clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	if _, err := s.client.Revoke(ctx, id); err != nil {
		return fmt.Errorf("etcdfake: revoke etcd lease %x: %w", int64(id), err)
	}
	return nil
}

// ExpireLock ends the current lease of etcdlock's lock name (queue mode,
// under this fake's Prefix) now: it revokes the lease of the contender with
// the smallest create revision under etcdlock.Key, the holder, as that
// lease's expiry would. Waiters keep their places. It fails, with an error
// wrapping ErrNoHolder, when nobody holds the lock, or the holder's lease
// ended before it could be revoked.
func (s *Server) ExpireLock(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	resp, err := s.client.Get(ctx, layout.EtcdKey(s.prefix, name, false), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return fmt.Errorf("etcdfake: expire etcd lock %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].Lease == 0 {
		return fmt.Errorf("etcdfake: expire etcd lock %q: %w", name, fakes.ErrNoHolder)
	}
	err = s.RevokeLease(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("etcdfake: expire etcd lock %q: the holder's lease ended meanwhile: %w", name, fakes.ErrNoHolder)
	}
	return err
}

// Leases lists the leases the cluster holds. On a real cluster shared with
// other tests, that includes theirs.
func (s *Server) Leases(ctx context.Context) ([]clientv3.LeaseID, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	resp, err := s.client.Leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcdfake: list etcd leases: %w", err)
	}
	ids := make([]clientv3.LeaseID, len(resp.Leases))
	for i, l := range resp.Leases {
		ids[i] = l.ID
	}
	return ids, nil
}

// deleteKeys deletes every key under the prefix on a real cluster.
func (s *Server) deleteKeys() error {
	ctx, cancel := context.WithTimeout(context.Background(), etcdTimeout)
	defer cancel()
	if _, err := s.client.Delete(ctx, s.prefix, clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("deleting keys %s* on %v: %w", s.prefix, s.real, err)
	}
	return nil
}

// Addr returns the host:port of every endpoint, joined by commas (the
// form of EnvEndpoints without the scheme).
func (s *Server) Addr() string {
	eps := s.Endpoints()
	for i, ep := range eps {
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			eps[i] = u.Host
		}
	}
	return strings.Join(eps, ",")
}

// etcd's leases run on the server's wall clock: there is no ManualTimer.
var _ fakes.Server = (*Server)(nil)
