package propertytest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// volatile matches what a run's log may hold that no seed fixes: the
// ports of in-process servers, the fakes' random key prefixes, the ids
// the servers draw (Consul sessions) and the GUIDs locks draw (zklock's
// node names, from locks.NewOwner).
// The histories themselves are compared as they are.
var volatile = regexp.MustCompile(`127\.0\.0\.1:\d+|lockproof-test-[0-9a-f]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}`)

// traceRuns runs the suite on factory with rapid's current flags and
// returns, per run, its log and its lock and register histories as text.
func traceRuns(t *testing.T, factory Factory, o Options) []string {
	t.Helper()
	s, err := newSuite(t, factory, o)
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	s.trace = func(m *machine) {
		lockH, regH, _ := m.rec.histories()
		var b strings.Builder
		b.WriteString(volatile.ReplaceAllString(strings.Join(m.log, "\n"), "<id>"))
		b.WriteString("\n--- lock history\n")
		b.WriteString(describeLockOps(m.lease, lockH, len(lockH)))
		b.WriteString("--- register history\n")
		for _, op := range regH {
			fmt.Fprintf(&b, "client %d at %d: %+v -> %+v\n", op.ClientID, op.Call, op.Input, op.Output)
		}
		runs = append(runs, b.String())
	}
	rapid.Check(t, s.prop)
	return runs
}

// The same seed gives the same runs, byte for byte, on MemLock and
// redislock in manual time: the scheduler, not the Go runtime, orders
// the requests; the time a request waits at the scheduler's gate does not
// count toward its RequestTimeout (locks.RequestContext), so a stalled
// request runs out of time when the run's clock says so; and the clients'
// jitter comes from the seed (locks.WithRand).
//
// mysqllock was among them until a loaded machine (load average 5) parted
// two replays of seed 20261125 twice at the same step of run 4: after a
// reply held 100 ms late, one replay logs client 0's refused TryLock first
// and the other client 1's waiting Lock granted (token 5). The scheduler
// noted no give-up there; the cause is not traced yet.
//
// consullock and Redlock are not among them: their replays are close but
// not exact. consullock's lease watches its key with blocking queries on a
// goroutine of its own, and miniconsul invalidates sessions on timers
// that fire on goroutines of their own: neither belongs to an operation,
// so neither is scheduled, and the writes they make move the index that
// is the fencing token. Two replays of a Redlock run on three miniredis
// nodes, one of them stopped and restarted, can part at a TryLock that wins
// in one and is refused in the other (seed 20261125, run 3); the cause is
// not traced yet.
//
// zklock on minizk (ZKLock) came close once its clients came from
// fakes.ZooKeeperServer.ConnectManual, and was among them for one CI run:
// under go test -race ./... on the CI machine, two replays of seed
// 20261125 parted at run 4 (at 14.176 s, a refused TryLock of client 0 in
// one, client 1's waiting Lock granted in the other), the scheduler noting
// no give-up; after the fault that expires the holder's session,
// go-zookeeper's reconnection and zklock's clean-ups sent again (its
// sweep, which pauses wall time between tries) run on goroutines no
// operation owns. Not traced further yet. Before ConnectManual, 2 of 5 tries of seed
// 20261125 replayed identically: the others parted after the fault that
// expires the holder's session, at a TryLock that failed with "could not
// connect to a server" in one replay and ran out of time in the other, as
// go-zookeeper's own clients sleep a second of wall time before each round
// of dialling their one server. ConnectManual's clients redial at once
// (and send no pings of wall time), so the reconnection and the new
// session (a transaction that takes a zxid, the fencing token's counter)
// are over before the scheduler sees the process quiescent. The GUIDs of
// zklock's node names are drawn at random and masked (volatile); they
// decide nothing, as the queue's order is the sequence number's. Its
// network cell (ZKLockWithNetworkFaults) is not: chaos.Proxy's resets
// and go-zookeeper's reconnections there, and zklock's clean-ups sent
// again after them (a pause of wall time, locks/zklock's sweep), are
// not ordered by the scheduler. Nor, yet, is every ZooKeeper mutant: three
// `lockproof replay`s of zk-waiter-without-recheck's seed
// 11011864038924615692, with the shrink's wall-time backstop raised to 10
// minutes so that only its bound by runs binds, printed two different
// minimal histories (a grant of token 25 to client 2 in one, of token 28
// to client 1 in another); not traced yet.
func TestSeedReplaysExactly(t *testing.T) {
	cases := []struct {
		name    string
		factory Factory
		o       Options
	}{
		{"memlock", MemLock(), Options{}},
		{"redislock", RedisLock(), Options{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			SetFlag(t, "rapid.checks", "4")
			SetFlag(t, "rapid.seed", "20261125")
			first := traceRuns(t, c.factory, c.o)
			second := traceRuns(t, c.factory, c.o)
			if len(first) != len(second) {
				t.Fatalf("%d runs, then %d with the same seed", len(first), len(second))
			}
			for i := range first {
				if first[i] == second[i] {
					continue
				}
				diff := firstDifference(first[i], second[i])
				if gaveUp(first[i]) || gaveUp(second[i]) {
					// The scheduler said so in the run's log: on a machine
					// too loaded to reach quiescence within maxQuiesce, it
					// promises no exact replay.
					t.Skipf("run %d differs between two replays, and the scheduler gave up waiting for quiescence in it (a loaded machine):\n%s", i+1, diff)
				}
				t.Fatalf("run %d differs between two replays of one seed:\n%s", i+1, diff)
			}
			t.Logf("%d runs replayed identically (%d lines in the first)", len(first), strings.Count(first[0], "\n"))
		})
	}
}

// gaveUp reports whether a run's trace holds the scheduler's note that it
// stopped waiting for quiescence.
func gaveUp(trace string) bool { return strings.Contains(trace, "scheduler: not quiescent") }

// firstDifference shows where two traces part.
func firstDifference(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			from := max(0, i-40)
			return fmt.Sprintf("line %d:\nfirst:  %s\nsecond: %s\n(context before:\n%s)", i+1, la[i], lb[i], strings.Join(la[from:i], "\n"))
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d and %d lines)", len(la), len(lb))
}
