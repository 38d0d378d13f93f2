// Benchmarks of this lock against go-redsync/redsync (single node) and
// bsm/redislock, in the same run, each on its own fresh miniredis.
//
// Run only the comparison table (a few minutes on 2 cores):
//
//	go test -run '^$' -bench 'Uncontended|Handoff' -benchtime 2000x -count 5 ./locks/redislock/ | tee compare.txt
//	benchstat compare.txt
//
// How to read it:
//   - Take the median of each metric across the -count runs (benchstat does);
//     single runs are noisy on shared cores.
//   - Compare libraries by ratios within one run of the whole table, never
//     against numbers from another machine or another day: every sub-benchmark
//     of one run shares the same server implementation and the same load.
//   - Uncontended/<lib>: ns/op and allocs/op of one lock+unlock, one goroutine.
//   - Handoff/<lib>/waiters=W: W goroutines take turns on one lock, holding it
//     ~100 µs each. ns/op is wall time per acquisition (1e9 / acq/s).
//     handoff-p50-ms and handoff-p99-ms: from the moment a holder calls its
//     unlock to the moment the next holder's acquire returns. acq/s:
//     acquisitions per second. srv-cmds/acq: commands miniredis executed per
//     acquisition, counting EVALSHA, MULTI and EXEC, and every redis.call
//     inside a script. cmds/acq: commands the clients sent per acquisition,
//     an EVALSHA counting one however many calls its script makes. rtts/acq:
//     round trips the clients made per acquisition, a pipeline counting once.
//     See countingHook for what is counted.
//
// Fairness columns, needed to read the others: self-handoff-% is the share
// of hand-offs that went back to the goroutine that had just released (it
// loops straight back to acquire); wait-p99-ms and wait-max-ms are the time
// one acquire call waited. redsync and bsm poll (redsync: random 50–250 ms;
// bsm: 100 ms here, as its README suggests), so the releasing goroutine
// usually wins again at once: their hand-offs look fast and their throughput
// high while the other goroutines wait out retry delays. Ours queues waiters
// FIFO and hands over by pub/sub.
//
// On a machine shared with other work, repeat the whole command with
// -count 1 rather than one -count 5: -count repeats each sub-benchmark back to
// back, so a burst of outside load lands on one library only.
//
// allocs/op on miniredis include the server's (it runs in this process, and
// each script run builds a Lua state). To see the clients alone, point
// LOCKPROOF_REDIS_ADDR (redisfake.EnvAddr) at a real Redis; the same table
// then runs there, counting srv-cmds from INFO commandstats.
package redislock_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/lockbench"
	"github.com/lockproof/lockproof/locks/lockbench/peers"
	"github.com/lockproof/lockproof/locks/redislock"
)

const (
	compareTTL  = 10 * time.Second
	compareHold = 100 * time.Microsecond
	// compareTimeout bounds one benchmark run, so a hang fails it instead of
	// stalling the whole table.
	compareTimeout = 3 * time.Minute
)

// library builds n workers on one lock name, sharing whatever the library
// means to be shared between goroutines of one process.
type library struct {
	name    string
	workers func(client redis.UniversalClient, name string, n int) ([]lockbench.Worker, error)
}

var libraries = []library{
	{"lockproof", lockproofWorkers},
	{"redsync", func(c redis.UniversalClient, name string, n int) ([]lockbench.Worker, error) {
		return peers.Redsync(c, name, compareTTL, n), nil
	}},
	{"bsm", func(c redis.UniversalClient, name string, n int) ([]lockbench.Worker, error) {
		return peers.BSM(c, name, compareTTL, n), nil
	}},
}

// lockproof: one Locker shared by every goroutine; each Lock gets its own lease.
func lockproofWorkers(client redis.UniversalClient, name string, n int) ([]lockbench.Worker, error) {
	l, err := redislock.New(client, name, locks.WithTTL(compareTTL))
	if err != nil {
		return nil, err
	}
	return lockbench.Shared(l, n), nil
}

// countingHook counts the round trips a go-redis client makes through
// Process and ProcessPipeline, and the commands they carry. A command sent
// alone (an EVALSHA, a SET NX, an EVAL after NOSCRIPT) is one of each; a
// pipeline is one round trip and as many commands as it holds (MULTI and
// EXEC included); the handshake of each new pooled connection counts too. Pub/sub commands (SUBSCRIBE, UNSUBSCRIBE, PING on the
// pub/sub connection) bypass hooks and are not counted here; the server
// counts them in srv-cmds. PUBLISH from inside a Lua script is a server-side
// call.
type countingHook struct{ rtts, cmds atomic.Int64 }

var _ redis.Hook = (*countingHook)(nil)

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.rtts.Add(1)
		h.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.rtts.Add(1)
		h.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// compareServer is the server of one benchmark run and one counted client
// on it: a fresh miniredis, or the real Redis named by redisfake.EnvAddr.
type compareServer struct {
	client *redis.Client
	hook   *countingHook
	// executed returns how many commands the server has executed,
	// counting EVALSHA and every redis.call inside a script.
	executed func() int64
	suffix   string // makes this run's lock names unique on a shared server
}

// startCompareServer starts miniredis on a free port and a client with a
// countingHook; both are closed by tb.Cleanup. miniredis never expires keys
// on its own, which these benchmarks do not need: every lock is released.
//
// With redisfake.EnvAddr set, the run uses that real server instead: the
// server's work then leaves this process, so ns/op and allocs/op are the
// client's own. Commands are counted from INFO commandstats.
func startCompareServer(tb testing.TB) *compareServer {
	tb.Helper()
	s := &compareServer{hook: &countingHook{}, suffix: "-" + locks.NewOwner()[:8]}
	addr := os.Getenv(redisfake.EnvAddr)
	if addr == "" {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			tb.Fatalf("start miniredis: %v", err)
		}
		tb.Cleanup(m.Close)
		addr = m.Addr()
		s.executed = func() int64 { return int64(m.CommandCount()) }
	} else {
		s.useReal(tb, addr)
	}
	s.client = redis.NewClient(&redis.Options{Addr: addr})
	tb.Cleanup(func() { _ = s.client.Close() })
	s.client.AddHook(s.hook)
	return s
}

// useReal counts commands on a real server through an uncounted admin
// client, which also deletes this run's keys at cleanup.
func (s *compareServer) useReal(tb testing.TB, addr string) {
	tb.Helper()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	tb.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	if err := admin.Ping(ctx).Err(); err != nil {
		tb.Fatalf("%s=%s: %v", redisfake.EnvAddr, addr, err)
	}
	s.executed = func() int64 {
		info, err := admin.Info(ctx, "commandstats").Result()
		if err != nil {
			tb.Errorf("INFO commandstats: %v", err)
			return 0
		}
		return sumCalls(info)
	}
	tb.Cleanup(func() {
		var keys []string
		it := admin.Scan(ctx, 0, "*"+s.suffix+"*", 256).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		err := it.Err()
		if err == nil && len(keys) > 0 {
			err = admin.Del(ctx, keys...).Err()
		}
		if err != nil {
			tb.Errorf("delete the benchmark's keys: %v", err)
		}
	})
}

// sumCalls adds up the calls= fields of INFO commandstats
// ("cmdstat_get:calls=3,usec=...").
func sumCalls(info string) int64 {
	var total int64
	for line := range strings.Lines(info) {
		_, rest, ok := strings.Cut(line, ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(n, 10, 64)
		if err == nil {
			total += v
		}
	}
	return total
}

// lockName returns base made unique to this run.
func (s *compareServer) lockName(base string) string { return base + s.suffix }

// counters are the server and client command counts at one moment.
type counters struct{ srv, rtts, cmds int64 }

func (s *compareServer) counters() counters {
	return counters{srv: s.executed(), rtts: s.hook.rtts.Load(), cmds: s.hook.cmds.Load()}
}

// reportPer reports the commands since `since` per n units. On a real
// server, the first INFO (counted once it has run) is not the lock's.
func (s *compareServer) reportPer(b *testing.B, since counters, n int, unit string) {
	now := s.counters()
	srv := now.srv - since.srv
	if os.Getenv(redisfake.EnvAddr) != "" {
		srv--
	}
	b.ReportMetric(float64(srv)/float64(n), "srv-cmds/"+unit)
	b.ReportMetric(float64(now.rtts-since.rtts)/float64(n), "rtts/"+unit)
	b.ReportMetric(float64(now.cmds-since.cmds)/float64(n), "cmds/"+unit)
}

// warmUp takes and releases the lock once, so that scripts are loaded and a
// pooled connection exists before anything is counted or timed.
// BenchmarkUncontended: one goroutine locks and unlocks one lock b.N times.
func BenchmarkUncontended(b *testing.B) {
	for _, lib := range libraries {
		b.Run(lib.name, func(b *testing.B) {
			s := startCompareServer(b)
			ctx, cancel := context.WithTimeout(context.Background(), compareTimeout)
			defer cancel()
			ws, err := lib.workers(s.client, s.lockName("bench-uncontended"), 1)
			if err != nil {
				b.Fatal(err)
			}
			w := ws[0]
			locktest.Cycles(b, ctx, w, 1) // warm up
			before := s.counters()
			b.ReportAllocs()
			b.ResetTimer()
			locktest.Cycles(b, ctx, w, b.N)
			b.StopTimer()
			s.reportPer(b, before, b.N, "op")
		})
	}
}

// BenchmarkHandoff: W goroutines share one client and contend for one lock
// until b.N acquisitions in total have completed. A goroutine that releases
// calls lock again at once, so a lock that lets it barge in ahead of the
// waiters hands the lock back to it (see self-handoff-%).
func BenchmarkHandoff(b *testing.B) {
	benchmarkWaiters(b, false)
}

// BenchmarkTurns is BenchmarkHandoff where a goroutine that released does
// not call lock again until another goroutine has acquired: every hand-off
// goes to a goroutine that was waiting, whatever the lock's fairness, so
// handoff-p50/p99 and acq/s measure how fast a release reaches a waiter.
//
// Polling locks need a small -benchtime here: with 4 waiters redsync
// hands off about every 100 ms.
//
//	go test -run '^$' -bench Turns -benchtime 300x -count 5 ./locks/redislock/
func BenchmarkTurns(b *testing.B) {
	benchmarkWaiters(b, true)
}

func benchmarkWaiters(b *testing.B, turns bool) {
	for _, lib := range libraries {
		b.Run(lib.name, func(b *testing.B) {
			for _, waiters := range []int{4, 16, 64} {
				b.Run(fmt.Sprintf("waiters=%d", waiters), func(b *testing.B) {
					benchmarkHandoff(b, lib, waiters, turns)
				})
			}
		})
	}
}

func benchmarkHandoff(b *testing.B, lib library, waiters int, turns bool) {
	s := startCompareServer(b)
	ctx, cancel := context.WithTimeout(context.Background(), compareTimeout)
	defer cancel()
	ws, err := lib.workers(s.client, s.lockName("bench-handoff"), waiters)
	if err != nil {
		b.Fatal(err)
	}
	locktest.Cycles(b, ctx, ws[0], 1) // warm up

	before := s.counters()
	b.ResetTimer()
	res, err := lockbench.Contend(ctx, ws, lockbench.Contention{Acquisitions: b.N, Hold: compareHold, Turns: turns})
	b.StopTimer()
	if err != nil {
		b.Fatalf("%s, %d waiters: %v", lib.name, waiters, err)
	}
	locktest.ReportContention(b, res)
	s.reportPer(b, before, b.N, "acq")
	// Fairness, for reading the numbers above: a lock that lets the releasing
	// goroutine take it straight back hands off fast and often, while the
	// other goroutines wait out their retry delays.
	if len(res.Handoffs) > 0 {
		b.ReportMetric(res.SelfHandoffPercent(), "self-handoff-%")
	}
	b.ReportMetric(locktest.PercentileMs(res.Waits, 99), "wait-p99-ms")
	b.ReportMetric(locktest.PercentileMs(res.Waits, 100), "wait-max-ms")
}
