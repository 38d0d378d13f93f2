package peers

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"

	"github.com/lockproof/lockproof/locks/lockbench"
)

// EtcdMutex returns a worker on a go.etcd.io/etcd/client/v3/concurrency
// Mutex on key, with a Session of its own on client (a Mutex's key is its
// session's lease, so each contender needs one, as a process would have).
// The session's TTL is ttl in whole seconds (at least 1). Close the
// returned func when done: it ends the session and revokes its lease.
func EtcdMutex(client *clientv3.Client, key string, ttl time.Duration) (lockbench.Worker, func() error, error) {
	s, err := concurrency.NewSession(client, concurrency.WithTTL(max(1, int(ttl/time.Second))))
	if err != nil {
		return nil, nil, err
	}
	return &etcdMutexWorker{concurrency.NewMutex(s, key)}, s.Close, nil
}

type etcdMutexWorker struct{ m *concurrency.Mutex }

func (w *etcdMutexWorker) Lock(ctx context.Context) error   { return w.m.Lock(ctx) }
func (w *etcdMutexWorker) Unlock(ctx context.Context) error { return w.m.Unlock(ctx) }

// EtcdRWMutexWriter returns a worker on the write lock of
// go.etcd.io/etcd/client/v3/experimental/recipes's RWMutex on key, with a
// Session of its own on client, as EtcdMutex. The recipe's Lock and Unlock
// take no context: they run on the session's client's.
func EtcdRWMutexWriter(client *clientv3.Client, key string, ttl time.Duration) (lockbench.Worker, func() error, error) {
	s, err := concurrency.NewSession(client, concurrency.WithTTL(max(1, int(ttl/time.Second))))
	if err != nil {
		return nil, nil, err
	}
	return &etcdRWWriter{recipe.NewRWMutex(s, key)}, s.Close, nil
}

type etcdRWWriter struct{ m *recipe.RWMutex }

func (w *etcdRWWriter) Lock(context.Context) error   { return w.m.Lock() }
func (w *etcdRWWriter) Unlock(context.Context) error { return w.m.Unlock() }
