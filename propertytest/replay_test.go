package propertytest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// TestSeedReplaysExactly checks that one seed gives the same runs, byte for
// byte, on MemLock, redislock, consullock, mysqllock and Redlock in manual
// time with every connection in memory (Backend.InProcess). It rests on:
// the scheduler, not the Go runtime, orders the requests; a request's
// RequestTimeout runs on the scheduler's request clock (requestClock),
// which runs it out only when the process is quiescent with the request
// unanswered; the clients' jitter comes from the seed (locks.WithRand);
// maxQuiesce counts CPU time as well as wall time. A run in which the
// scheduler gave up waiting for quiescence fails it, since a skip under
// load proves nothing.
//
// Further causes of divergence that were removed: a crash waits for
// quiescence, so a cancelled Lock's background clean-up cannot race the
// next crash; locks.RequestContext's Err looks at its parent itself, and
// the Consul and Redis gates send no request whose context ended while it
// was held; the fakes' in-memory miniredis clients redial at once rather
// than after a wall-time back-off that looks like quiescence; the end of a
// run heals nodes by index, not in a map's order.
//
// zklock (ZKLock) is not among them: after the fault that expires the
// holder's session, the holder's clean-up delete (leaseOps.monitor) and
// go-zookeeper's new session are runnable together inside one step, so no
// quiescence orders them, and a failed delete still takes a zxid, the
// fencing token's counter. Its network cell stays on TCP through
// chaos.Proxy, whose resets and reconnections the scheduler does not
// order either.
func TestSeedReplaysExactly(t *testing.T) {
	cases := []struct {
		name    string
		factory propertytest.Factory
		o       propertytest.Options
	}{
		{"memlock", backends.MemLock(), propertytest.Options{}},
		{"redislock", backends.RedisLock(), propertytest.Options{}},
		{"consullock", backends.ConsulLock(), backends.ConsulLockOptions()},
		{"mysqllock", backends.MySQLLock(), propertytest.Options{}},
		{"redlock", backends.Redlock(3), propertytest.Options{Claims: []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultNodeDown}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			suitemain.SetFlag(t, "rapid.checks", "4")
			suitemain.SetFlag(t, "rapid.seed", "20261125")
			first := propertytest.TraceRuns(t, c.factory, c.o)
			second := propertytest.TraceRuns(t, c.factory, c.o)
			if len(first) != len(second) {
				t.Fatalf("%d runs, then %d with the same seed", len(first), len(second))
			}
			for i := range first {
				if first[i] != second[i] {
					t.Fatalf("run %d differs between two replays of one seed:\n%s", i+1, firstDifference(first[i], second[i]))
				}
				// A give-up promises no exact replay, even when the two
				// agreed: it fails the claim rather than skip it (a skip
				// under load proved nothing).
				if gaveUp(first[i]) || gaveUp(second[i]) {
					t.Fatalf("run %d: the scheduler gave up waiting for quiescence", i+1)
				}
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
