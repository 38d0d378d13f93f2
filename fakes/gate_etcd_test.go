package fakes_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/etcdlock"
)

func etcdLockNames(t *testing.T) []string {
	s := fakes.Etcd(t)
	l, err := etcdlock.New(s.NewClient(), "gated", s.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	names := gatedRun(t, l, false)
	ungatedRun(t, l)
	return names
}

func TestEtcdGateSeesEtcdlock(t *testing.T) {
	first := etcdLockNames(t)
	for _, want := range []string{"lock: etcd Lease/LeaseGrant", "renew: etcd Lease/LeaseKeepAlive"} {
		if !slices.Contains(first, want) {
			t.Errorf("no %q among %q", want, first)
		}
	}
	sameNames(t, first, etcdLockNames(t))
}

func TestEtcdGateLeavesWatchesAlone(t *testing.T) {
	s := fakes.Etcd(t)
	c := s.NewClient()
	g := &recordingGate{}
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
	if got := g.names(t, "put and watch"); !slices.Equal(got, []string{"etcd KV/Put"}) {
		t.Errorf("the gate saw %q, want only the put", got)
	}
}

func TestEtcdGateHoldsTheRequest(t *testing.T) {
	s := fakes.Etcd(t)
	l, err := etcdlock.New(s.NewClient(), "held", s.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	heldLock(t, l, func() error {
		resp, err := s.Client().Leases(context.Background())
		if err != nil {
			return err
		}
		if len(resp.Leases) != 0 {
			return fmt.Errorf("the cluster has %d lease(s)", len(resp.Leases))
		}
		return nil
	})
}
