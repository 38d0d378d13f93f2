package fakes

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/lockproof/lockproof/locks"
)

// EnvEtcdEndpoints names the environment variable that points Etcd and
// EtcdCluster at a real etcd cluster instead of embedded members:
// comma-separated client URLs ("http://127.0.0.1:2379"). Tests share that
// cluster; each fake works under its own Prefix and deletes its keys at
// cleanup.
const EnvEtcdEndpoints = "LOCKPROOF_ETCD_ENDPOINTS"

// etcdTimeout bounds each housekeeping call the fake makes (deleting keys,
// revoking and listing leases); etcdReadyCheck the first request, which
// tells whether the cluster answers at all.
const (
	etcdTimeout    = 10 * time.Second
	etcdReadyCheck = 3 * time.Second
)

// EtcdServer is one etcd cluster for a test: embedded members (see Etcd and
// EtcdCluster) or the real cluster named by EnvEtcdEndpoints. Everything it
// opened is closed at the test's cleanup: first every client it handed out,
// then the members, so that no open stream holds up a member's shutdown.
type EtcdServer struct {
	t       testing.TB
	prefix  string
	logs    *logBuffer
	log     *zap.Logger
	members []*etcdMember // nil on a real cluster
	real    []string      // the endpoints of a real cluster
	startup time.Duration
	client  *clientv3.Client

	mu      sync.Mutex
	clients []*clientv3.Client
}

// Etcd starts a one-member etcd for t, embedded in the test process (data in
// t.TempDir(), loopback ports chosen by the kernel, no fsync), or connects to
// the real cluster named by EnvEtcdEndpoints. It fails the test if the
// cluster cannot be started or reached. The member's logs are kept in memory
// and printed only if the test fails.
func Etcd(t testing.TB) *EtcdServer {
	t.Helper()
	return newEtcd(t, 1)
}

// EtcdCluster starts an n-member etcd cluster for t, every member embedded in
// the test process on its own loopback client and peer ports. With
// EnvEtcdEndpoints set it uses that real cluster instead if it lists at least
// n endpoints (one per member), and skips the test otherwise. Stop and
// Restart fail a member and bring it back.
func EtcdCluster(t testing.TB, n int) *EtcdServer {
	t.Helper()
	if n < 1 {
		t.Fatalf("fakes: EtcdCluster needs at least one member, got %d", n)
	}
	return newEtcd(t, n)
}

func newEtcd(t testing.TB, n int) *EtcdServer {
	t.Helper()
	logs := &logBuffer{}
	s := &EtcdServer{t: t, prefix: "lockproof-test-" + locks.NewOwner()[:8] + "/", logs: logs, log: logs.logger()}
	t.Cleanup(s.dumpLogs) // registered first: runs last
	if env := os.Getenv(EnvEtcdEndpoints); env != "" {
		s.real = etcdEndpoints(t, env, n)
	} else {
		began := time.Now()
		s.startMembers(n)
		s.startup = time.Since(began)
		t.Cleanup(s.stopMembers)
	}
	t.Cleanup(s.closeClients) // runs before stopMembers
	s.client = s.NewClient()
	s.checkReady()
	if s.members == nil {
		t.Cleanup(s.deleteKeys) // runs before closeClients
	}
	return s
}

// etcdEndpoints parses EnvEtcdEndpoints: at least n distinct endpoints, or
// the test is skipped.
func etcdEndpoints(t testing.TB, env string, n int) []string {
	t.Helper()
	var eps []string
	seen := map[string]bool{}
	for e := range strings.SplitSeq(env, ",") {
		e = strings.TrimSpace(e)
		if e == "" || seen[e] {
			continue
		}
		seen[e] = true
		eps = append(eps, e)
	}
	if len(eps) < n {
		t.Skipf("fakes: the test needs an etcd cluster of %d members, %s lists %d", n, EnvEtcdEndpoints, len(eps))
	}
	return eps
}

// checkReady fails the test unless the cluster answers a linearizable read.
func (s *EtcdServer) checkReady() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), etcdReadyCheck)
	defer cancel()
	if _, err := s.client.Get(ctx, s.prefix+"ready"); err != nil {
		if s.members == nil {
			s.t.Fatalf("fakes: %s=%s: etcd does not answer: %v", EnvEtcdEndpoints, strings.Join(s.real, ","), err)
		}
		s.t.Fatalf("fakes: the embedded etcd does not answer: %v", err)
	}
}

// clientConfig is the configuration of every client the fake hands out:
// all members' endpoints, logs into the fake's buffer, the gate's
// interceptors (EtcdGateDialOptions) and then dialOpts.
func (s *EtcdServer) clientConfig(dialOpts []grpc.DialOption) clientv3.Config {
	return clientv3.Config{
		Endpoints:   s.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      s.log.Named("client"),
		DialOptions: append(EtcdGateDialOptions(), dialOpts...),
	}
}

// Client returns the fake's own client, ready to use and closed at cleanup.
// It knows every member's endpoint and fails over between them. Its
// requests pass through the locks.Gate of their context, as NewClient's do.
func (s *EtcdServer) Client() *clientv3.Client { return s.client }

// NewClient returns another client of every member, with its own
// connections and the given extra gRPC dial options (interceptors, for
// instance), closed at cleanup before the members stop: a second process.
// Its requests pass through the locks.Gate of their context as
// "etcd <Service>/<Method>" (see EtcdGateDialOptions); interceptors in
// dialOpts run inside the gate's.
func (s *EtcdServer) NewClient(dialOpts ...grpc.DialOption) *clientv3.Client {
	s.t.Helper()
	return s.newClient(s.clientConfig(dialOpts))
}

// MemberClient returns a client of member i alone, closed at cleanup.
func (s *EtcdServer) MemberClient(i int) *clientv3.Client {
	s.t.Helper()
	cfg := s.clientConfig(nil)
	cfg.Endpoints = []string{s.Endpoint(i)}
	return s.newClient(cfg)
}

func (s *EtcdServer) newClient(cfg clientv3.Config) *clientv3.Client {
	s.t.Helper()
	c, err := clientv3.New(cfg)
	if err != nil {
		s.t.Fatalf("fakes: etcd client of %v: %v", cfg.Endpoints, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients = append(s.clients, c)
	return c
}

// closeClients closes every client handed out.
func (s *EtcdServer) closeClients() {
	s.mu.Lock()
	clients := s.clients
	s.clients = nil
	s.mu.Unlock()
	for _, c := range clients {
		_ = c.Close() // only fails for a client closed already
	}
}

// Endpoints returns the client URL of every member, in member order (on a
// real cluster, those of EnvEtcdEndpoints).
func (s *EtcdServer) Endpoints() []string {
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
func (s *EtcdServer) Endpoint(i int) string {
	s.t.Helper()
	eps := s.Endpoints()
	if i < 0 || i >= len(eps) {
		s.t.Fatalf("fakes: no etcd member %d in a cluster of %d", i, len(eps))
	}
	return eps[i]
}

// Members returns the number of members (on a real cluster, of endpoints).
func (s *EtcdServer) Members() int { return len(s.Endpoints()) }

// Real reports whether the fake talks to a real cluster.
func (s *EtcdServer) Real() bool { return s.members == nil }

// StartupTime returns how long the embedded members took to start and elect
// a leader; zero on a real cluster.
func (s *EtcdServer) StartupTime() time.Duration { return s.startup }

// Prefix returns the key prefix unique to this fake ("lockproof-test-<8
// hex>/"). Pass it to locks with locks.WithPrefix (LockOptions does).
func (s *EtcdServer) Prefix() string { return s.prefix }

// LockOptions returns the options a test passes to a lock constructor so the
// lock works under this fake's Prefix. etcd's leases run on the server's
// wall clock, so there is no manual time for etcd: revoke a lease
// (RevokeLease) to make it expire now.
func (s *EtcdServer) LockOptions() []locks.Option {
	return []locks.Option{locks.WithPrefix(s.prefix)}
}

// RevokeLease revokes lease id now, as its expiry would: the server deletes
// every key attached to it at once.
func (s *EtcdServer) RevokeLease(ctx context.Context, id clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	if _, err := s.client.Revoke(ctx, id); err != nil {
		return fmt.Errorf("fakes: revoke etcd lease %x: %w", int64(id), err)
	}
	return nil
}

// ExpireLock ends the current lease of etcdlock's lock name (queue mode,
// under this fake's Prefix) now: it revokes the lease of the contender with
// the smallest create revision, the holder, as that lease's expiry would.
// Waiters keep their places. It fails when nobody holds the lock.
func (s *EtcdServer) ExpireLock(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	// etcdlock's layout: Prefix + name with "%" and "/" percent-encoded + "/".
	key := s.prefix + strings.NewReplacer("%", "%25", "/", "%2F").Replace(name) + "/"
	resp, err := s.client.Get(ctx, key, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return fmt.Errorf("fakes: expire etcd lock %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].Lease == 0 {
		return fmt.Errorf("fakes: expire etcd lock %q: nobody holds it", name)
	}
	return s.RevokeLease(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
}

// Leases lists the leases the cluster holds. On a real cluster shared with
// other tests, that includes theirs.
func (s *EtcdServer) Leases(ctx context.Context) ([]clientv3.LeaseID, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	resp, err := s.client.Leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("fakes: list etcd leases: %w", err)
	}
	ids := make([]clientv3.LeaseID, len(resp.Leases))
	for i, l := range resp.Leases {
		ids[i] = l.ID
	}
	return ids, nil
}

// deleteKeys deletes every key under the prefix on a real cluster.
func (s *EtcdServer) deleteKeys() {
	ctx, cancel := context.WithTimeout(context.Background(), etcdTimeout)
	defer cancel()
	if _, err := s.client.Delete(ctx, s.prefix, clientv3.WithPrefix()); err != nil {
		s.t.Errorf("fakes: cleanup: deleting keys %s* on %v: %v", s.prefix, s.real, err)
	}
}

// dumpLogs prints the members' and clients' logs if the test failed.
func (s *EtcdServer) dumpLogs() {
	if s.t.Failed() {
		s.t.Logf("fakes: etcd logs of this test:\n%s", s.logs.String())
	}
}
