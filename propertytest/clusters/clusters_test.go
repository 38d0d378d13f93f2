package clusters

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// fewRuns keeps a test on a real cluster short: n runs of 5 steps on
// average, shrinking cut to one candidate (each run takes seconds).
func fewRuns(t *testing.T, n int, o propertytest.Options) propertytest.Options {
	t.Helper()
	suitemain.SetFlag(t, "rapid.checks", fmt.Sprint(n))
	suitemain.SetFlag(t, "rapid.steps", "5")
	o.ShrinkRuns = 1
	return o
}

// logReport logs what rep found, with the time it took.
func logReport(t *testing.T, what string, rep *propertytest.Report, took time.Duration) {
	t.Helper()
	t.Logf("%s: %d runs in %v, failed %v, broken %v, checked %v", what, rep.Runs, took.Round(time.Millisecond),
		rep.Failed, rep.Broken(), rep.Checked)
	for _, v := range rep.Violations {
		t.Logf("%s: %s: %s", what, v.Property, v.Detail)
	}
}

// etcdlock on a real 3-member etcd whose leader is isolated again and
// again (an Ongoing partition of the leader) keeps every property, with
// the deadlock-freedom bound counting the declared Recovery (EtcdRecovery):
// issue 35's schedule, without its false alarm.
func TestEtcdLockUnderLeaderIsolation(t *testing.T) {
	c := Etcd(t)
	o := fewRuns(t, 2, EtcdOptions())
	began := time.Now()
	rep := propertytest.Check(t, c.EtcdLock(IsolateLeader), o)
	logReport(t, fmt.Sprintf("recovery %v", EtcdRecovery(c.Timing)), rep, time.Since(began))
	if rep.Failed || rep.Runs == 0 || rep.Checked[propertytest.DeadlockFreedom] != rep.Runs {
		t.Fatalf("with the declared Recovery: failed %v, broken %v, checked %v\n%s",
			rep.Failed, rep.Broken(), rep.Checked, rep.Output)
	}
}

// zklock on a real 3-server ZooKeeper keeps its properties while the suite
// isolates, kills and pauses the leader.
func TestZKLockUnderLeaderFaults(t *testing.T) {
	c := ZooKeeper(t)
	o := fewRuns(t, 2, ZKOptions())
	began := time.Now()
	rep := propertytest.Check(t, c.ZKLock(), o)
	logReport(t, "zklock", rep, time.Since(began))
	safety := []propertytest.Property{propertytest.Exclusivity, propertytest.Symmetry}
	if rep.Runs == 0 || rep.Checked[propertytest.Exclusivity] != rep.Runs {
		t.Fatalf("checks ran %v in %d runs\n%s", rep.Checked, rep.Runs, rep.Output)
	}
	for _, p := range rep.Broken() {
		if slices.Contains(safety, p) {
			t.Errorf("zklock broke %s under leader faults\n%s", p, rep.Output)
		}
	}
	if rep.Failed {
		t.Errorf("zklock failed under leader faults: %v\n%s", rep.Broken(), rep.Output)
	}
}

// consullock on 3 real Consul servers keeps its properties while the suite
// isolates, kills and pauses the leader: the lock-delay keeps a holder
// whose session the servers drop exclusive, and the deadlock-freedom
// bound counts the declared Recovery (ConsulRecovery).
func TestConsulLockUnderLeaderFaults(t *testing.T) {
	c := Consul(t)
	o := fewRuns(t, 2, ConsulOptions())
	began := time.Now()
	rep := propertytest.Check(t, c.ConsulLock(), o)
	logReport(t, fmt.Sprintf("consullock, recovery %v", ConsulRecovery(c.Timing)), rep, time.Since(began))
	if rep.Runs == 0 || rep.Checked[propertytest.Exclusivity] != rep.Runs || rep.Checked[propertytest.DeadlockFreedom] != rep.Runs {
		t.Fatalf("checks ran %v in %d runs\n%s", rep.Checked, rep.Runs, rep.Output)
	}
	if rep.Failed {
		t.Errorf("consullock failed under leader faults: %v\n%s", rep.Broken(), rep.Output)
	}
}

// zklock on a real ZooKeeper whose leader is paused before every
// deadlock-freedom probe and stays paused through it: each probe must
// reach the two members that elected a new leader. Without a bounded
// handshake (zklock.HandshakeDialer) the client tried the paused leader,
// whose kernel accepts the connection, and waited out go-zookeeper's
// connect timeout (6⅔ session timeouts): every probe went unanswered.
func TestZKLockUnderLeaderPauses(t *testing.T) {
	c := ZooKeeper(t)
	o := fewRuns(t, 2, ZKOptions())
	began := time.Now()
	rep := propertytest.Check(t, c.ZKLock(PauseLeader), o)
	logReport(t, "zklock, leader paused", rep, time.Since(began))
	if rep.Failed || rep.Runs == 0 || rep.Checked[propertytest.DeadlockFreedom] != rep.Runs {
		t.Fatalf("failed %v, broken %v, checked %v\n%s", rep.Failed, rep.Broken(), rep.Checked, rep.Output)
	}
}
