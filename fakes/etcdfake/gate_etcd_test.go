package etcdfake_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/etcdlock"
)

func etcdLockNames(t *testing.T) []string {
	s := etcdfake.New(t)
	l, err := etcdlock.New(s.NewClient(), "gated", s.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	names := faketest.GatedRun(t, l, false)
	faketest.UngatedRun(t, l)
	return names
}

func TestEtcdGateSeesEtcdlock(t *testing.T) {
	t.Parallel()
	first := etcdLockNames(t)
	for _, want := range []string{"lock: etcd Lease/LeaseGrant", "renew: etcd Lease/LeaseKeepAlive"} {
		if !slices.Contains(first, want) {
			t.Errorf("no %q among %q", want, first)
		}
	}
	faketest.SameNames(t, first, etcdLockNames(t))
}

func TestEtcdGateLeavesWatchesAlone(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	c := s.NewClient()
	g := &faketest.RecordingGate{}
	ctx, cancel := context.WithCancel(locks.WithGate(context.Background(), g))
	defer cancel()
	key := s.Prefix() + "w"
	wch := c.Watch(ctx, key)
	if _, err := c.Put(ctx, key, "v"); err != nil {
		t.Fatal(err)
	}
	if ev := <-wch; ev.Err() != nil || len(ev.Events) != 1 {
		t.Fatalf("watch: %+v", ev)
	}
	cancel()
	for range wch { // drained once the watch is cancelled
	}
	if got := g.Names(t, "put and watch"); !slices.Equal(got, []string{"etcd KV/Put"}) {
		t.Errorf("the gate saw %q, want only the put", got)
	}
}

func TestEtcdGateHoldsTheRequest(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	l, err := etcdlock.New(s.NewClient(), "held", s.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	// The first request is the session's LeaseGrant: while it is held,
	// nothing of this lock may be on the server. (Counting the cluster's
	// leases would not do on a real server shared with other tests.)
	before, err := s.Client().Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	faketest.HeldLock(t, l, func() error {
		keys, err := s.Client().Get(context.Background(), s.Prefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		if keys.Count != 0 {
			return fmt.Errorf("%d key(s) under the lock's prefix %q", keys.Count, s.Prefix())
		}
		if s.Real() {
			return nil
		}
		resp, err := s.Client().Leases(context.Background())
		if err != nil {
			return err
		}
		if len(resp.Leases) != len(before.Leases) {
			return fmt.Errorf("the cluster has %d lease(s), %d before the lock began", len(resp.Leases), len(before.Leases))
		}
		return nil
	})
}
