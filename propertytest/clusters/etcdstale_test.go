package clusters

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/lab"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/etcdlock"
)

// etcdlock keeps a lease granted through the majority while the cluster's
// old leader, cut off and not yet stepped down, calls that lease "not
// found" (etcd before 3.4.31: lab's TestEtcdCutOffLeaderDeniesNewLeases).
// The lock's client reaches all three members and sends its requests to
// them in turn, so some of the Renews' keep-alives go to the old leader:
// CI-13's claimed violation, a grant and then "not held" at once. The
// leader is paused while cut off, so that when it resumes it still
// believes it leads for about an election timeout, in which the Renews
// run.
func TestEtcdLockRenewsThroughACutOffLeader(t *testing.T) {
	c := Etcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := c.etcdClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var logged strings.Builder
	logger := slog.New(slog.NewTextHandler(&syncWriter{w: &logged}, nil))
	l, err := etcdlock.New(cli, "stale", locks.WithTTL(5*time.Second), locks.WithRequestTimeout(150*time.Millisecond),
		locks.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	for range c.Members() { // a connection to every member, made before the fault
		if _, err := cli.Get(ctx, "warm-up"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Member(old).Pause(); err != nil {
		t.Fatal(err)
	}
	g, err := lab.Isolate(len(c.Members()), old)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, g); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AwaitLeader(ctx, old); err != nil {
		t.Fatal(err)
	}
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock with the old leader cut off: %v", err)
	}
	if err := c.Member(old).Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	// Renew until the old leader has answered a keep-alive "not found"
	// (the lock logs that it doubts it), at most 12 times: the client's
	// turns among the members decide which requests reach it.
	var errs []error
	doubted := 0
	for len(errs) < 12 && doubted == 0 {
		err := lease.Renew(ctx)
		errs = append(errs, err)
		doubted = strings.Count(logged.String(), "a member answered that a lease is gone")
		if err != nil {
			break
		}
	}
	t.Logf("%d Renews in %v after the old leader resumed, %d answers doubted: %v",
		len(errs), time.Since(resumed).Round(time.Millisecond), doubted, errs)
	if i := slices.IndexFunc(errs, func(err error) bool { return err != nil }); i >= 0 {
		t.Fatalf("Renew %d failed: %v", i, errs[i])
	}
	if doubted == 0 {
		t.Fatalf("no keep-alive was answered \"not found\" in %d Renews: the cut-off leader was never asked, or stepped down first", len(errs))
	}
	if err := c.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// syncWriter serializes writes to w: the lock logs from its own goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
