package etcdlock

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/locks"
)

// testTimeout bounds every wait of a test for something the lock does.
const testTimeout = 10 * time.Second

func newLocker(t testing.TB, s *etcdfake.Server, name string, opts ...locks.Option) *Locker {
	t.Helper()
	l, err := New(s.Client(), name, append(s.LockOptions(), opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

func mustLock(t testing.TB, l *Locker) locks.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	lease, err := l.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	return lease
}

func token(t testing.TB, lease locks.Lease) locks.Token {
	t.Helper()
	tok, ok := lease.Token()
	if !ok {
		t.Fatal("etcdlock lease has no fencing token")
	}
	return tok
}

// contenders returns the lock's contender keys in queue order (create
// revision), with the revision they were read at.
func contenders(t testing.TB, c *clientv3.Client, l *Locker) ([]*mvccpb.KeyValue, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	resp, err := c.Get(ctx, l.Key(), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatalf("list contenders of %s: %v", l.Key(), err)
	}
	return resp.Kvs, resp.Header.Revision
}

// waitContenders blocks until exactly n keys exist under the lock's key
// (queue mode: holder and waiters), by watching them: no polling.
func waitContenders(t testing.TB, c *clientv3.Client, l *Locker, n int) []*mvccpb.KeyValue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for {
		kvs, rev := contenders(t, c, l)
		if len(kvs) == n {
			return kvs
		}
		wch := c.Watch(ctx, l.Key(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		select {
		case <-wch:
		case <-ctx.Done():
			for _, kv := range kvs {
				t.Logf("contender %s create %d lease %x", kv.Key, kv.CreateRevision, kv.Lease)
			}
			t.Fatalf("timed out waiting for %d contenders of %s; have %d", n, l.Key(), len(kvs))
		}
	}
}
