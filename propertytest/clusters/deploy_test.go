package clusters

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
)

// A user's ZooKeeper deployment (backends.ZKLockOnAll, what lockproof
// check -zk a,b,c runs) on the lab's 3 real servers, with the client-side
// faults on every client-to-server link (backends.LinkFaultNames), each
// proxy reaching its server through the lab's dialer: the link faults run
// against a real replicated ensemble, and zklock keeps every property it
// claims (the link partitions are not claimed there, so what they break
// is reported as expected). Runs are made until a link fault struck.
func TestZKDeploymentLinkFaultsOnTheLab(t *testing.T) {
	c := ZooKeeper(t)
	o := fewRuns(t, 3, backends.ZKLockOnOptions())
	var injected atomic.Int32
	deploy := backends.ZKLockOnAll(c.ClientAddrs(), backends.WithDialer(c.Dialer().DialContext))
	f := func(env propertytest.Env) (*propertytest.Backend, error) {
		be, err := deploy(env)
		if err != nil {
			return nil, err
		}
		for i := range be.Faults {
			inject := be.Faults[i].Inject
			be.Faults[i].Inject = func() error { injected.Add(1); return inject() }
		}
		return be, nil
	}
	for round := 0; round < 4 && injected.Load() == 0; round++ {
		began := time.Now()
		rep := propertytest.Check(t, f, o)
		logReport(t, "zklock on the ensemble, link faults", rep, time.Since(began))
		if rep.Runs == 0 || rep.Checked[propertytest.Exclusivity] != rep.Runs {
			t.Fatalf("checks ran %v in %d runs\n%s", rep.Checked, rep.Runs, rep.Output)
		}
		if rep.Failed {
			t.Fatalf("zklock broke a claimed property on the ensemble: %v\n%s", rep.Broken(), rep.Output)
		}
	}
	if injected.Load() == 0 {
		t.Fatal("no link fault struck in 12 runs")
	}
	t.Logf("%d link faults injected", injected.Load())
}
