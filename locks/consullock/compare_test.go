// Benchmarks of this lock against api.Lock from github.com/hashicorp/consul/api,
// in the same run, each sub-benchmark on its own fresh server: miniconsul, and
// a real agent when a consul binary is found (consulfake.EnvBin or PATH;
// skipped otherwise).
//
// Run the comparison table:
//
//	go test -run '^$' -bench 'Uncontended|Handoff' -benchtime 300x -count 5 ./locks/consullock/ | tee compare.txt
//	benchstat compare.txt
//
// and the start-up times:
//
//	go test -run '^$' -bench Startup -benchtime 5x ./locks/consullock/
//
// How to read it:
//   - Take the median of each metric across the -count runs; compare the two
//     libraries by ratios within one run, on the same server kind.
//   - Uncontended/<server>/<lib>: ns/op and allocs/op of one lock+unlock, one
//     goroutine. On miniconsul allocs include the server's (same process).
//   - Handoff/<server>/<lib>/waiters=16: 16 goroutines take turns on one lock,
//     holding it ~100 µs each. handoff-p50-ms and handoff-p99-ms: from the
//     moment a holder calls unlock to the moment the next holder's acquire
//     returns; acq/s: acquisitions per second; reqs/acq: HTTP requests the
//     clients sent per acquisition (blocking queries included).
//
// Both libraries create one session per acquisition and destroy it after,
// both wait with blocking queries and both monitor a held key; lockproof adds
// the consistent read of its fencing token, and api.Lock reads the key before
// every acquire. The handoff differs: with "lockproof" the 16 goroutines
// share one Locker, whose Lock calls queue locally so that one is on the
// server's queue at a time; with "lockproof-apart" each goroutine has its
// own Locker, as 16 processes would, and all queue on the server, where a
// release wakes the next waiter in line. Each
// api.Lock (one per goroutine: it holds its state) contends on its own too,
// but a loser of that race that reads the key back free sleeps
// api.DefaultLockRetryTime (5 s) before looking again.
package consullock_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/fakes/miniconsul"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/consullock"
	"github.com/lockproof/lockproof/locks/lockbench"
	"github.com/lockproof/lockproof/locks/lockbench/peers"
)

const (
	compareTTL     = 10 * time.Second
	compareHold    = 100 * time.Microsecond
	compareTimeout = 3 * time.Minute
)

// worker is one goroutine's handle on a lock.
type worker = lockbench.Worker

type library struct {
	name    string
	workers func(client *api.Client, key string, n int) ([]worker, error)
}

var libraries = []library{
	{"lockproof", lockproofWorkers},
	{"lockproof-apart", lockproofApartWorkers},
	{"api.Lock", func(client *api.Client, key string, n int) ([]worker, error) {
		return peers.ConsulLock(client, key, compareTTL, n)
	}},
}

// lockproof: one Locker shared by every goroutine.
type lockproofWorker struct {
	l     *consullock.Locker
	lease locks.Lease
}

func lockproofWorkers(client *api.Client, key string, n int) ([]worker, error) {
	l, err := consullock.New(client, key, locks.WithTTL(compareTTL), locks.WithPrefix(""))
	if err != nil {
		return nil, err
	}
	ws := make([]worker, n)
	for i := range ws {
		ws[i] = &lockproofWorker{l: l}
	}
	return ws, nil
}

// lockproof-apart: a Locker per goroutine, as separate processes would
// have (on one client): no local queue, every waiter contends on the server.
func lockproofApartWorkers(client *api.Client, key string, n int) ([]worker, error) {
	ws := make([]worker, n)
	for i := range ws {
		l, err := consullock.New(client, key, locks.WithTTL(compareTTL), locks.WithPrefix(""))
		if err != nil {
			return nil, err
		}
		ws[i] = &lockproofWorker{l: l}
	}
	return ws, nil
}

func (w *lockproofWorker) Lock(ctx context.Context) (err error) {
	w.lease, err = w.l.Lock(ctx)
	return err
}

func (w *lockproofWorker) Unlock(ctx context.Context) error {
	err := w.lease.Unlock(ctx)
	w.lease = nil
	return err
}

// countingTransport counts the HTTP requests of a client.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// compareServer is one server and a counting client on it.
type compareServer struct {
	c      *consulfake.Server
	client *api.Client
	count  *countingTransport
}

type serverKind struct {
	name string
	opt  consulfake.Option
}

var serverKinds = []serverKind{
	{"miniconsul", consulfake.ForceMiniconsul()},
	{"agent", consulfake.ForceAgent()},
}

func startCompareServer(b *testing.B, kind serverKind) *compareServer {
	b.Helper()
	c := consulfake.New(b, kind.opt)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)
	count := &countingTransport{next: tr}
	client, err := api.NewClient(&api.Config{Address: c.Addr(), HttpClient: &http.Client{Transport: count}})
	if err != nil {
		b.Fatal(err)
	}
	return &compareServer{c: c, client: client, count: count}
}

// BenchmarkUncontended: one goroutine locks and unlocks one lock b.N times.
func BenchmarkUncontended(b *testing.B) {
	for _, kind := range serverKinds {
		b.Run(kind.name, func(b *testing.B) {
			for _, lib := range libraries {
				b.Run(lib.name, func(b *testing.B) {
					s := startCompareServer(b, kind)
					ctx, cancel := context.WithTimeout(context.Background(), compareTimeout)
					defer cancel()
					ws, err := lib.workers(s.client, s.c.Prefix()+"bench-uncontended", 1)
					if err != nil {
						b.Fatal(err)
					}
					locktest.Uncontended(b, ctx, ws[0], s.count.n.Load)
				})
			}
		})
	}
}

// BenchmarkHandoff: 16 goroutines contend for one lock until b.N
// acquisitions in total have completed.
func BenchmarkHandoff(b *testing.B) {
	for _, kind := range serverKinds {
		b.Run(kind.name, func(b *testing.B) {
			for _, lib := range libraries {
				b.Run(lib.name+"/waiters=16", func(b *testing.B) {
					benchmarkHandoff(b, kind, lib, 16)
				})
			}
		})
	}
}

func benchmarkHandoff(b *testing.B, kind serverKind, lib library, waiters int) {
	s := startCompareServer(b, kind)
	ctx, cancel := context.WithTimeout(context.Background(), compareTimeout)
	defer cancel()
	ws, err := lib.workers(s.client, s.c.Prefix()+"bench-handoff", waiters)
	if err != nil {
		b.Fatal(err)
	}
	locktest.Cycles(b, ctx, ws[0], 1) // warm up
	before := s.count.n.Load()
	b.ResetTimer()
	res, err := lockbench.Contend(ctx, ws, lockbench.Contention{Acquisitions: b.N, Hold: compareHold})
	b.StopTimer()
	if err != nil {
		b.Fatalf("%s: %v", lib.name, err)
	}
	locktest.ReportContention(b, res)
	b.ReportMetric(float64(s.count.n.Load()-before)/float64(b.N), "reqs/acq")
}

// cleanupTB runs the cleanups registered during one benchmark iteration at
// its end, so that each iteration starts and stops its own server.
type cleanupTB struct {
	testing.TB
	fns []func()
}

func (c *cleanupTB) Cleanup(f func()) { c.fns = append(c.fns, f) }

func (c *cleanupTB) run() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
	c.fns = nil
}

// BenchmarkStartup: start a server until it serves sessions, and stop it.
// ms/start is the start alone, without the stop.
func BenchmarkStartup(b *testing.B) {
	b.Run("miniconsul", func(b *testing.B) {
		var total time.Duration
		for range b.N {
			began := time.Now()
			s, err := miniconsul.Start()
			total += time.Since(began)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(total)/float64(b.N)/float64(time.Millisecond), "ms/start")
	})
	b.Run("agent", func(b *testing.B) {
		if consulfake.Binary() == "" {
			b.Skipf("no consul binary: set %s or put consul on PATH", consulfake.EnvBin)
		}
		var total time.Duration
		for range b.N {
			tb := &cleanupTB{TB: b}
			c := consulfake.New(tb, consulfake.ForceAgent())
			total += c.Startup()
			tb.run()
		}
		b.ReportMetric(float64(total)/float64(b.N)/float64(time.Millisecond), "ms/start")
	})
}
