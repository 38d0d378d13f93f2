// Benchmarks of this lock (queue mode and the naive herd mode) against
// go.etcd.io/etcd/client/v3/concurrency's Mutex, and of NewRWMutex's
// writers against the write lock of experimental/recipes's RWMutex (the
// "-rw-writer" rows: both queue by revision, each writer watching the key
// before its own), in one run on one embedded
// etcd member (etcdfake.New: no fsync), or on the real etcd named by
// etcdfake.EnvEndpoints.
//
// Run the comparison table (about a minute on 2 cores):
//
//	go test -run '^$' -bench Compare -benchtime 400x -count 5 ./locks/etcdlock/ | tee compare.txt
//	benchstat compare.txt
//
// How to read it:
//   - Take medians across the -count runs; compare libraries by ratios
//     within one run, never across machines or days.
//   - Compare/Uncontended/<lib>: ns/op and allocs/op of one lock+unlock by
//     one goroutine; reqs/op counts the requests the client sent
//     (peers.EtcdCounter: each unary RPC such as Txn or Grant, and each
//     message sent on a stream, such as a keep-alive or a watch request).
//   - Compare/Handoff/<lib>/waiters=W: W workers, each its own client and
//     lock handle (W processes), take turns on one lock, holding it ~100 µs.
//     ns/op is wall time per acquisition. handoff-p50-ms and handoff-p99-ms:
//     from the moment a holder calls unlock to the moment the next holder's
//     lock returns. events/handoff: watch events the etcd server delivered to
//     all clients per hand-off (counted by a gRPC interceptor on every
//     client's Watch streams): about one when each waiter watches only its
//     predecessor, about the number of waiters when all watch the one key.
//     reqs/acq: requests per acquisition, counted as in reqs/op.
//
// The library's own memory use is mixed with the embedded server's, which
// runs in the same process; point etcdfake.EnvEndpoints at a real etcd to
// see the client's alone.
package etcdlock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/etcdlock"
	"github.com/lockproof/lockproof/locks/lockbench"
	"github.com/lockproof/lockproof/locks/lockbench/peers"
)

const (
	compareTTL     = 10 * time.Second
	compareHold    = 100 * time.Microsecond
	compareWaiters = 16
	// compareTimeout bounds one benchmark run, so that a hang fails it
	// instead of stalling the table.
	compareTimeout = 3 * time.Minute
)

// worker is one process's handle on a lock, which it closes at the end.
type worker interface {
	lockbench.Worker
	close()
}

// library builds a worker on lock name with its own client.
type library struct {
	name   string
	worker func(c *clientv3.Client, prefix, name string) (worker, error)
}

var libraries = []library{
	{"lockproof", lockproofWorker(etcdlock.New)},
	{"lockproof-naive", lockproofWorker(etcdlock.NewNaive)},
	{"concurrency", mutexWorker},
	{"lockproof-rw-writer", lockproofWorker(rwWriter)},
	{"recipe-rw-writer", recipeWriter},
}

// rwWriter is the writers' Locker of etcdlock.NewRWMutex.
func rwWriter(c *clientv3.Client, name string, opts ...locks.Option) (*etcdlock.Locker, error) {
	m, err := etcdlock.NewRWMutex(c, name, opts...)
	if err != nil {
		return nil, err
	}
	return m.Locker(), nil
}

// recipe: go.etcd.io/etcd/client/v3/experimental/recipes's RWMutex in
// write mode, on a Session of its own; its Lock and Unlock take no ctx
// (they run on the session's).
type recipeWorker struct {
	s *concurrency.Session
	m *recipe.RWMutex
}

func recipeWriter(c *clientv3.Client, prefix, name string) (worker, error) {
	s, err := concurrency.NewSession(c, concurrency.WithTTL(int(compareTTL/time.Second)))
	if err != nil {
		return nil, err
	}
	return &recipeWorker{s: s, m: recipe.NewRWMutex(s, prefix+name)}, nil
}

func (w *recipeWorker) Lock(context.Context) error   { return w.m.Lock() }
func (w *recipeWorker) Unlock(context.Context) error { return w.m.Unlock() }
func (w *recipeWorker) close()                       { _ = w.s.Close() }

type ourWorker struct {
	l     *etcdlock.Locker
	lease locks.Lease
}

func lockproofWorker(mk func(*clientv3.Client, string, ...locks.Option) (*etcdlock.Locker, error)) func(*clientv3.Client, string, string) (worker, error) {
	return func(c *clientv3.Client, prefix, name string) (worker, error) {
		l, err := mk(c, name, locks.WithPrefix(prefix), locks.WithTTL(compareTTL))
		if err != nil {
			return nil, err
		}
		return &ourWorker{l: l}, nil
	}
}

func (w *ourWorker) Lock(ctx context.Context) (err error) {
	w.lease, err = w.l.Lock(ctx)
	return err
}

func (w *ourWorker) Unlock(ctx context.Context) error {
	err := w.lease.Unlock(ctx)
	w.lease = nil
	return err
}

func (w *ourWorker) close() {}

// concurrency: a Mutex needs a Session of its own (its key is the session's
// lease), as a process would have.
type concurrencyWorker struct {
	s *concurrency.Session
	m *concurrency.Mutex
}

func mutexWorker(c *clientv3.Client, prefix, name string) (worker, error) {
	s, err := concurrency.NewSession(c, concurrency.WithTTL(int(compareTTL/time.Second)))
	if err != nil {
		return nil, err
	}
	return &concurrencyWorker{s: s, m: concurrency.NewMutex(s, prefix+name)}, nil
}

func (w *concurrencyWorker) Lock(ctx context.Context) error   { return w.m.Lock(ctx) }
func (w *concurrencyWorker) Unlock(ctx context.Context) error { return w.m.Unlock(ctx) }
func (w *concurrencyWorker) close()                           { _ = w.s.Close() }

// bench is the state shared by the sub-benchmarks: one server.
type bench struct {
	s   *etcdfake.Server
	seq atomic.Int64
}

// workers builds n workers of lib on a fresh lock name, each with its own
// counted client; the clients close at the server's cleanup.
func (bn *bench) workers(b testing.TB, lib library, n int, c *peers.EtcdCounter) []worker {
	b.Helper()
	name := fmt.Sprintf("bench-%d", bn.seq.Add(1))
	ws := make([]worker, n)
	for i := range ws {
		w, err := lib.worker(bn.s.NewClient(c.DialOptions()...), bn.s.Prefix(), name)
		if err != nil {
			b.Fatal(err)
		}
		ws[i] = w
	}
	b.Cleanup(func() {
		for _, w := range ws {
			w.close()
		}
	})
	return ws
}

// BenchmarkCompare runs the whole table on one server.
func BenchmarkCompare(b *testing.B) {
	bn := &bench{s: etcdfake.New(b)}
	b.Run("Uncontended", func(b *testing.B) {
		for _, lib := range libraries {
			b.Run(lib.name, func(b *testing.B) { bn.uncontended(b, lib) })
		}
	})
	b.Run("Handoff", func(b *testing.B) {
		for _, lib := range libraries {
			b.Run(fmt.Sprintf("%s/waiters=%d", lib.name, compareWaiters), func(b *testing.B) {
				bn.handoff(b, lib, compareWaiters)
			})
		}
	})
}

func (bn *bench) uncontended(b *testing.B, lib library) {
	ctx, cancel := context.WithTimeout(context.Background(), compareTimeout)
	defer cancel()
	c := &peers.EtcdCounter{}
	locktest.Uncontended(b, ctx, bn.workers(b, lib, 1, c)[0], c.Requests)
}

func (bn *bench) handoff(b *testing.B, lib library, waiters int) {
	ctx, cancel := context.WithTimeout(context.Background(), compareTimeout)
	defer cancel()
	c := &peers.EtcdCounter{}
	ws := bn.workers(b, lib, waiters, c)
	lws := make([]lockbench.Worker, len(ws))
	for i, w := range ws {
		lws[i] = w
	}
	events, reqs := c.Events(), c.Requests()
	b.ResetTimer()
	res, err := lockbench.Contend(ctx, lws, lockbench.Contention{Acquisitions: b.N, Hold: compareHold})
	b.StopTimer()
	if err != nil {
		b.Fatalf("%s: %v", lib.name, err)
	}
	handoffs := res.Handoffs
	locktest.ReportContention(b, res)
	if len(handoffs) > 0 {
		b.ReportMetric(float64(c.Events()-events)/float64(len(handoffs)), "events/handoff")
	}
	b.ReportMetric(float64(c.Requests()-reqs)/float64(b.N), "reqs/acq")
}
