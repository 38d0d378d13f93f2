// Package peers adapts the locks lockproof is compared with to
// lockbench.Worker, so that one harness measures them all in one run:
// github.com/go-redsync/redsync/v4 and github.com/bsm/redislock on Redis,
// go.etcd.io/etcd/client/v3/concurrency.Mutex on etcd,
// github.com/hashicorp/consul/api.Lock on Consul and
// github.com/go-zookeeper/zk's Lock on ZooKeeper. EtcdCounter and ZKCounter
// count what the clients send and the watch events they receive.
package peers

import (
	"context"
	"errors"
	"time"

	bsmlock "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks/lockbench"
)

// Redsync returns n workers on redsync mutexes (one Mutex each, as a Mutex
// holds its current value) from one Redsync over client. Tries are raised so
// that a waiter never gives up; the retry delay keeps redsync's default
// (random 50–250 ms).
func Redsync(client redis.UniversalClient, name string, ttl time.Duration, n int) []lockbench.Worker {
	rs := redsync.New(goredis.NewPool(client))
	ws := make([]lockbench.Worker, n)
	for i := range ws {
		ws[i] = &redsyncWorker{rs.NewMutex(name, redsync.WithExpiry(ttl), redsync.WithTries(1<<20))}
	}
	return ws
}

type redsyncWorker struct{ m *redsync.Mutex }

func (w *redsyncWorker) Lock(ctx context.Context) error { return w.m.LockContext(ctx) }

func (w *redsyncWorker) Unlock(ctx context.Context) error {
	ok, err := w.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock reported the lock not held")
	}
	return err
}

// BSMRetry is the retry strategy of the bsm/redislock workers: a linear
// backoff of 100 ms, as its README suggests.
const BSMRetry = 100 * time.Millisecond

// BSM returns n workers on one bsm/redislock Client over client. Obtain
// retries until its ctx ends, so give Lock a ctx with a deadline.
func BSM(client redis.UniversalClient, name string, ttl time.Duration, n int) []lockbench.Worker {
	c := bsmlock.New(client)
	opt := &bsmlock.Options{RetryStrategy: bsmlock.LinearBackoff(BSMRetry)}
	ws := make([]lockbench.Worker, n)
	for i := range ws {
		ws[i] = &bsmWorker{c: c, name: name, ttl: ttl, opt: opt}
	}
	return ws
}

type bsmWorker struct {
	c    *bsmlock.Client
	name string
	ttl  time.Duration
	opt  *bsmlock.Options
	held *bsmlock.Lock
}

func (w *bsmWorker) Lock(ctx context.Context) (err error) {
	w.held, err = w.c.Obtain(ctx, w.name, w.ttl, w.opt)
	return err
}

func (w *bsmWorker) Unlock(ctx context.Context) error {
	if w.held == nil {
		return errors.New("bsm: Unlock without a lock")
	}
	err := w.held.Release(ctx)
	w.held = nil
	return err
}
