package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/etcdlock"
)

// These tests drive etcdlock through chaos's proxy. They live here rather
// than in chaos so that chaos's test binary does not link the embedded etcd.

// chaosEpoch starts the manual clocks of this file.
var chaosEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// chaosProxy starts a chaos proxy to target and closes it when the test ends.
func chaosProxy(t *testing.T, target string) *chaos.Proxy {
	t.Helper()
	p, err := chaos.StartProxy(target, 1)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestEtcdPartitionedHolderLosesItsLease: the holder is cut off from etcd
// (a partition without RST) until its lease runs out on the server. Its
// Done() fires, a waiter is granted with a higher token, and the cut-off
// holder's fenced write is refused once it can write again.
func TestEtcdPartitionedHolderLosesItsLease(t *testing.T) {
	e := etcdfake.New(t)
	if e.Real() {
		t.Skip("it finds A's lease as the server's only one: needs an embedded etcd of its own")
	}
	ctx := context.Background()
	const ttl = 2 * time.Second
	p := chaosProxy(t, strings.TrimPrefix(e.Endpoint(0), "http://"))
	viaProxy, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Addr()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = viaProxy.Close() })
	clock := fakes.NewClock(chaosEpoch) // A's own clock: its deadline, without waiting for it
	a, err := etcdlock.New(viaProxy, "job", append(e.LockOptions(), locks.WithTTL(ttl), locks.WithClock(clock))...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := etcdlock.New(e.NewClient(), "job", append(e.LockOptions(), locks.WithTTL(ttl))...)
	if err != nil {
		t.Fatal(err)
	}
	var fence locks.Fence[string]

	held, err := a.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tokA, _ := held.Token()
	if err := fence.Write(tokA, "a"); err != nil {
		t.Fatal(err)
	}
	leases, err := e.Leases(ctx)
	if err != nil || len(leases) != 1 {
		t.Fatalf("leases before the partition: %v, %v; want A's only", leases, err)
	}

	p.Partition()
	// On the server, A's lease runs out: nothing renews it any more.
	if err := e.RevokeLease(ctx, leases[0]); err != nil {
		t.Fatal(err)
	}
	// On A's side, its renewals fail and its TTL passes.
	clock.Advance(ttl)
	select {
	case <-held.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the partitioned holder's Done() did not fire after its TTL")
	}

	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	next, err := b.Lock(bctx)
	if err != nil {
		t.Fatalf("waiter after the holder's lease ran out: %v", err)
	}
	defer next.Unlock(ctx)
	tokB, _ := next.Token()
	if tokB <= tokA {
		t.Fatalf("new token %v not above the partitioned holder's %v", tokB, tokA)
	}
	if err := fence.Write(tokB, "b"); err != nil {
		t.Fatal(err)
	}
	p.Heal()
	if err := fence.Write(tokA, "a again"); !errors.Is(err, locks.ErrStaleToken) {
		t.Fatalf("partitioned holder's write after healing: %v, want ErrStaleToken", err)
	}
	if err := held.Unlock(ctx); err == nil {
		t.Fatal("the partitioned holder's Unlock succeeded after losing its lease")
	}
	if fence.Value() != "b" {
		t.Fatalf("register holds %q, want b", fence.Value())
	}
}

// TestEtcdExpireLock: the fake's control ends the holder's lease of an
// etcdlock lock (the fake knows its key layout, escaped names included),
// and the waiter takes over.
func TestEtcdExpireLock(t *testing.T) {
	e := etcdfake.New(t)
	ctx := context.Background()
	const name = "jobs/nightly%1"
	a, err := etcdlock.New(e.Client(), name, e.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := etcdlock.New(e.NewClient(), name, e.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	held, err := a.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	if err := e.ExpireLock(ctx, name); err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	next, err := b.Lock(bctx)
	if err != nil {
		t.Fatalf("waiter after ExpireLock: %v", err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.ExpireLock(ctx, name); err == nil {
		t.Fatal("ExpireLock with nobody holding succeeded")
	}
}

// TestEtcdFrozenMemberIsRoutedAround: one member of three holds every
// request its clients send without answering, its connections open, as a
// frozen (SIGSTOPped) member does; here its link is partitioned without
// RST. etcd's client sends the members requests in turn, so one of every
// three goes there. TryLock, Unlock and Lock still succeed, each within
// 2 s: a request unanswered within the request timeout is sent again, to
// another member. (Before they were bounded, the request sent to that
// member held each of them until its context ended; and a TryLock that
// revoked its unanswered lease between tries sent three requests a try,
// each try's transaction to the same member. Seen in the lab: 0 of 10
// TryLocks with the leader frozen.)
func TestEtcdFrozenMemberIsRoutedAround(t *testing.T) {
	e := etcdfake.NewCluster(t, 3)
	if e.Real() {
		t.Skip("needs an embedded cluster, one member behind a proxy")
	}
	p := chaosProxy(t, strings.TrimPrefix(e.Endpoint(0), "http://"))
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"http://" + p.Addr(), e.Endpoint(1), e.Endpoint(2)},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(), // not a line for each request the frozen member holds
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	// Every member's connection in use before the freeze, as a long-lived
	// client's are.
	for range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.Get(ctx, "warm")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	l, err := etcdlock.New(cli, "job", append(e.LockOptions(), locks.WithTTL(2*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	p.Partition()
	defer p.Heal()
	const bound = 2 * time.Second
	op := func(what string, f func(context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		if err := f(ctx); err != nil {
			t.Fatalf("%s with a member frozen: %v", what, err)
		}
	}
	for i := range 6 {
		var lease locks.Lease
		acquire := l.TryLock
		if i%2 == 1 {
			acquire = l.Lock
		}
		op(fmt.Sprintf("acquisition %d", i), func(ctx context.Context) (err error) {
			lease, err = acquire(ctx)
			return err
		})
		op(fmt.Sprintf("Unlock %d", i), lease.Unlock)
	}
}
