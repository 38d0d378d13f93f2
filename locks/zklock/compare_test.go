// Benchmarks of this lock against go-zookeeper's own zk.Lock, in one run on
// one server: minizk in real time (zkfake.New), or the real server
// named by zkfake.EnvAddr.
//
// Run the comparison table:
//
//	go test -run '^$' -bench Compare -benchtime 400x -count 5 ./locks/zklock/ | tee compare.txt
//	benchstat compare.txt
//
// How to read it:
//   - Take medians across the -count runs; compare libraries by ratios
//     within one run, never across machines or days.
//   - Compare/Uncontended/<lib>: ns/op and allocs/op of one lock+unlock by
//     one goroutine; reqs/op counts the requests the client sent
//     (peers.ZKCounter, which reads them off the wire at the dialer: each
//     request packet, pings included).
//   - Compare/Handoff/<lib>/waiters=W: W workers, each with its own
//     connection and so its own session (W processes), take turns on one
//     lock, holding it ~100 µs, every hand-off going to a waiter. ns/op is
//     wall time per acquisition. handoff-p50-ms and handoff-p99-ms: from
//     the moment a holder calls unlock to the moment the next holder's lock
//     returns. events/handoff: watch events all clients received per
//     hand-off, about one when each waiter watches only its predecessor, as
//     both libraries do. reqs/acq: requests per acquisition.
//
// `lockproof bench -backends zk` measures the same on a fresh server per
// library and run, and prints the table with ratios.
package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/lockbench"
	"github.com/lockproof/lockproof/locks/lockbench/peers"
	"github.com/lockproof/lockproof/locks/zklock"
)

const (
	compareTTL  = 10 * time.Second // the session timeout, and zklock's TTL
	compareHold = 100 * time.Microsecond
	// compareTimeout bounds one benchmark run, so that a hang fails it
	// instead of stalling the table.
	compareTimeout = 3 * time.Minute
)

// library builds a worker on lock name below prefix over conn.
type library struct {
	name   string
	worker func(conn *zk.Conn, prefix, name string) (lockbench.Worker, error)
}

var libraries = []library{
	{"lockproof", func(conn *zk.Conn, prefix, name string) (lockbench.Worker, error) {
		l, err := zklock.New(conn, name, locks.WithPrefix(prefix), locks.WithTTL(compareTTL))
		if err != nil {
			return nil, err
		}
		return lockbench.FromLocker(l), nil
	}},
	{"zk.Lock", func(conn *zk.Conn, prefix, name string) (lockbench.Worker, error) {
		return peers.ZKLock(conn, prefix+"/"+name), nil
	}},
	// The writers' view of NewRWMutex: go-zookeeper has no read-write lock
	// to set beside it, so it is measured against the mutex, whose queue
	// it shares.
	{"lockproof-rw-writer", func(conn *zk.Conn, prefix, name string) (lockbench.Worker, error) {
		m, err := zklock.NewRWMutex(conn, name, locks.WithPrefix(prefix), locks.WithTTL(compareTTL))
		if err != nil {
			return nil, err
		}
		return lockbench.FromLocker(m.Locker()), nil
	}},
}

// bench is the state shared by the sub-benchmarks: one server.
type bench struct {
	z   *zkfake.Server
	seq atomic.Int64
}

// workers builds n workers of lib on a fresh lock name, each with its own
// counted connection, which has its session when workers returns and is
// closed when the benchmark ends.
func (bn *bench) workers(b *testing.B, lib library, n int, c *peers.ZKCounter) []lockbench.Worker {
	b.Helper()
	name := fmt.Sprintf("bench-%d", bn.seq.Add(1))
	ws := make([]lockbench.Worker, n)
	for i := range ws {
		conn, events, err := zk.Connect(bn.z.Servers(), compareTTL, zk.WithDialer(c.Dial), zk.WithLogger(benchQuiet{}))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(conn.Close)
		if err := awaitSession(events); err != nil {
			b.Fatal(err)
		}
		if ws[i], err = lib.worker(conn, bn.z.Prefix(), name); err != nil {
			b.Fatal(err)
		}
	}
	return ws
}

// awaitSession waits for a connection's session, for at most compareTTL.
func awaitSession(events <-chan zk.Event) error {
	deadline := time.After(compareTTL)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				return errors.New("connection closed before its session")
			}
			if e.State == zk.StateHasSession {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("no session within %v", compareTTL)
		}
	}
}

// benchQuiet discards go-zookeeper's log lines.
type benchQuiet struct{}

func (benchQuiet) Printf(string, ...any) {}

// BenchmarkCompare runs the whole table on one server.
func BenchmarkCompare(b *testing.B) {
	bn := &bench{z: zkfake.New(b)}
	b.Run("Uncontended", func(b *testing.B) {
		for _, lib := range libraries {
			b.Run(lib.name, func(b *testing.B) { bn.uncontended(b, lib) })
		}
	})
	b.Run("Handoff", func(b *testing.B) {
		for _, lib := range libraries {
			for _, w := range []int{4, 16, 64} {
				b.Run(fmt.Sprintf("%s/waiters=%d", lib.name, w), func(b *testing.B) { bn.handoff(b, lib, w) })
			}
		}
	})
}

func (bn *bench) uncontended(b *testing.B, lib library) {
	ctx, cancel := context.WithTimeout(context.Background(), compareTimeout)
	defer cancel()
	c := &peers.ZKCounter{}
	locktest.Uncontended(b, ctx, bn.workers(b, lib, 1, c)[0], c.Requests)
}

func (bn *bench) handoff(b *testing.B, lib library, waiters int) {
	ctx, cancel := context.WithTimeout(context.Background(), compareTimeout)
	defer cancel()
	c := &peers.ZKCounter{}
	ws := bn.workers(b, lib, waiters, c)
	events, reqs := c.Events(), c.Requests()
	b.ResetTimer()
	res, err := lockbench.Contend(ctx, ws, lockbench.Contention{Acquisitions: b.N, Hold: compareHold, Turns: true})
	b.StopTimer()
	if err != nil {
		b.Fatalf("%s: %v", lib.name, err)
	}
	locktest.ReportContention(b, res)
	if len(res.Handoffs) > 0 {
		b.ReportMetric(float64(c.Events()-events)/float64(len(res.Handoffs)), "events/handoff")
	}
	b.ReportMetric(float64(c.Requests()-reqs)/float64(b.N), "reqs/acq")
}
