package etcdfake_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/locks"
)

// etcdStartBudget is the start-up time a test fails beyond: the target is
// well under a second, measured around 0.3 s; the margin is for -race on
// shared cores.
const etcdStartBudget = 3 * time.Second

func TestEtcdClientWorks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := etcdfake.New(t)
	if !s.Real() {
		t.Logf("embedded etcd started in %v", s.StartupTime())
		if d := s.StartupTime(); d <= 0 || d > etcdStartBudget {
			t.Errorf("StartupTime() = %v, want in (0, %v]", d, etcdStartBudget)
		}
		if s.Members() != 1 || s.Embedded(0) == nil {
			t.Errorf("Members() = %d, Embedded(0) = %v; want one running member", s.Members(), s.Embedded(0))
		}
	}
	key := s.Prefix() + "k"
	if _, err := s.Client().Put(ctx, key, "v"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	resp, err := s.NewClient().Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get from a second client = %v, %v; want v", resp, err)
	}
	if !strings.HasPrefix(s.Endpoint(0), "http") {
		t.Errorf("Endpoint(0) = %q", s.Endpoint(0))
	}
	o, err := locks.Resolve("x/", s.LockOptions()...)
	if err != nil || o.Prefix != s.Prefix() {
		t.Fatalf("LockOptions resolve to prefix %q, %v; want %q", o.Prefix, err, s.Prefix())
	}
}

func TestEtcdPrefixIsUnique(t *testing.T) {
	t.Parallel()
	a, b := etcdfake.New(t), etcdfake.New(t)
	for _, p := range []string{a.Prefix(), b.Prefix()} {
		if !strings.HasPrefix(p, "lockproof-test-") || !strings.HasSuffix(p, "/") {
			t.Errorf("Prefix() = %q, want lockproof-test-<hex>/", p)
		}
	}
	if a.Prefix() == b.Prefix() {
		t.Fatalf("two fakes share the prefix %q", a.Prefix())
	}
}

// TestEtcdRevokeLease: a revoked lease is gone from Leases and its key
// from the store, at once.
func TestEtcdRevokeLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := etcdfake.New(t)
	c := s.Client()
	grant, err := c.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	key := s.Prefix() + "leased"
	if _, err := c.Put(ctx, key, "v", clientv3.WithLease(grant.ID)); err != nil {
		t.Fatal(err)
	}
	ids, err := s.Leases(ctx)
	if err != nil || !slices.Contains(ids, grant.ID) {
		t.Fatalf("Leases() = %v, %v; want it to list %x", ids, err, grant.ID)
	}
	if err := s.RevokeLease(ctx, grant.ID); err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Get(ctx, key); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("key of a revoked lease: %v, %v; want gone", resp, err)
	}
	ids, err = s.Leases(ctx)
	if err != nil || slices.Contains(ids, grant.ID) {
		t.Fatalf("Leases() = %v, %v after revoking %x", ids, err, grant.ID)
	}
	if err := s.RevokeLease(ctx, grant.ID); err == nil {
		t.Fatal("revoking a revoked lease succeeded")
	}
}

// TestEtcdCleanupIsFast: the fake closes its clients before the member, so
// a client's open watch does not hold the shutdown up for seconds.
func TestEtcdCleanupIsFast(t *testing.T) {
	t.Parallel()
	if os.Getenv(etcdfake.EnvEndpoints) != "" {
		t.Skip("nothing to stop on a real cluster")
	}
	var s *etcdfake.Server
	var stopped time.Time
	t.Run("with an open watch", func(t *testing.T) {
		s = etcdfake.New(t)
		wch := s.NewClient().Watch(context.Background(), s.Prefix(), clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		if wr := <-wch; !wr.Created {
			t.Fatalf("watch not created: %v", wr.Err())
		}
		t.Cleanup(func() { stopped = time.Now() }) // runs first
	})
	if d := time.Since(stopped); d > 2*time.Second {
		t.Fatalf("cleanup took %v", d)
	}
	if s.Embedded(0) != nil {
		t.Fatal("the member still runs after cleanup")
	}
}

// TestEtcdClusterSurvivesOneMember: three members; with one stopped the
// cluster serves writes; with two stopped a write fails within its deadline;
// restarted, the members serve again, with their data.
func TestEtcdClusterSurvivesOneMember(t *testing.T) {
	t.Parallel()
	s := etcdfake.NewCluster(t, 3)
	if s.Real() {
		t.Skip("needs embedded members to stop")
	}
	t.Logf("3 members started in %v", s.StartupTime())
	c := s.Client()
	put := func(key string, d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := c.Put(ctx, s.Prefix()+key, "v")
		return err
	}
	if eps := s.Endpoints(); len(eps) != 3 || eps[0] == eps[1] || eps[1] == eps[2] {
		t.Fatalf("Endpoints() = %v, want 3 distinct", eps)
	}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := s.MemberClient(i).Put(ctx, s.Prefix()+"via", "member")
		cancel()
		if err != nil {
			t.Fatalf("write through member %d alone: %v", i, err)
		}
	}
	s.Stop(0)
	if s.Running(0) {
		t.Fatal("member 0 runs after Stop")
	}
	if err := put("one-down", 5*time.Second); err != nil {
		t.Fatalf("write with one member of three down: %v", err)
	}
	s.Stop(1)
	start := time.Now()
	if err := put("two-down", 500*time.Millisecond); err == nil {
		t.Fatal("write succeeded with two members of three down")
	} else if !errors.Is(err, context.DeadlineExceeded) && time.Since(start) > 2*time.Second {
		t.Fatalf("write with two down: %v after %v", err, time.Since(start))
	}
	checkRequireLeader(t, s)
	s.Restart(0)
	s.Restart(1)
	if err := put("all-up", 10*time.Second); err != nil {
		t.Fatalf("write after the restarts: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := s.MemberClient(0).Get(ctx, s.Prefix()+"one-down")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("restarted member 0 reads the write made while it was down: %v, %v", resp, err)
	}
}

func TestEtcdFollowsTheEnvironment(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	if want := os.Getenv(etcdfake.EnvEndpoints) != ""; s.Real() != want {
		t.Fatalf("Real() = %v with %s=%q", s.Real(), etcdfake.EnvEndpoints, os.Getenv(etcdfake.EnvEndpoints))
	}
}

func TestEtcdUnreachableFailsClearly(t *testing.T) {
	t.Setenv(etcdfake.EnvEndpoints, "http://"+faketest.ClosedAddr)
	msg := faketest.FatalMessage(t, func(tb testing.TB) { etcdfake.New(tb) })
	if !strings.Contains(msg, etcdfake.EnvEndpoints) || !strings.Contains(msg, "does not answer") {
		t.Fatalf("New with an unreachable server failed with %q", msg)
	}
}

func TestEtcdClusterNeedsEnoughRealEndpoints(t *testing.T) {
	t.Setenv(etcdfake.EnvEndpoints, "http://"+faketest.ClosedAddr)
	msg := faketest.FatalMessage(t, func(tb testing.TB) { etcdfake.NewCluster(tb, 3) })
	if !strings.Contains(msg, "skip:") || !strings.Contains(msg, "3 members") {
		t.Fatalf("NewCluster(3) with one real endpoint ended with %q", msg)
	}
}

// checkRequireLeader checks, on s with members 0 and 1 stopped, that the
// fake's clients send require-leader: a write through member 2 alone is
// refused with "no leader" once that member knows it has none, where a
// client without the flag waits out its deadline.
func checkRequireLeader(t *testing.T, s *etcdfake.Server) {
	t.Helper()
	put := func(c *clientv3.Client) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.Put(ctx, s.Prefix()+"no-leader", "v")
		return err
	}
	fake := s.MemberClient(2)
	var err error
	for range 20 { // member 2 needs an election timeout to give its leader up
		if err = put(fake); errors.Is(err, rpctypes.ErrNoLeader) {
			break
		}
	}
	if !errors.Is(err, rpctypes.ErrNoLeader) {
		t.Fatalf("a write of the fake's client through a member without a leader: %v, want %v", err, rpctypes.ErrNoLeader)
	}
	plain, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint(2)}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := put(plain); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a write without require-leader through a member without a leader: %v, want %v", err, context.DeadlineExceeded)
	}
}
