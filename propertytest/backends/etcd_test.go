package backends

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// etcdRecipes runs the etcd semaphore's and read-write mutex's suites,
// which go test ./... skips: on the embedded etcd, in real time, their two
// runs took from 10 s to 2.5 min on an idle machine. CI's step 2 asks for
// them.
var etcdRecipes = flag.Bool("propertytest.etcdrecipes", false,
	"propertytest: also run the suite on the etcd semaphore and read-write mutex, in real time (on by LOCKPROOF_DEEP=1)")

// skipEtcdRecipe skips a recipe's suite on etcd unless asked for.
func skipEtcdRecipe(t *testing.T) {
	if !*etcdRecipes && os.Getenv("LOCKPROOF_DEEP") != "1" {
		t.Skip("the etcd recipes' suites run in real time, 10 s to minutes: run them with -propertytest.etcdrecipes or LOCKPROOF_DEEP=1")
	}
}

// setSteps sets rapid's average number of actions per run to n for one
// test, unless -rapid.steps was given or LOCKPROOF_DEEP is set: runs in
// real time cost seconds each.
func setSteps(t *testing.T, n int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.steps" })
	if given || os.Getenv("LOCKPROOF_DEEP") == "1" {
		return
	}
	old := flag.Lookup("rapid.steps").Value.String()
	if err := flag.Set("rapid.steps", strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set("rapid.steps", old) })
}

// etcdRuns sets rapid's checks and steps for a suite run on etcd, in real
// time (seconds per run): n runs of 7 steps on average by default (3 runs
// took 10-20 s, too much of go test's two minutes), 40 runs of rapid's
// default length with LOCKPROOF_DEEP=1 (about ten minutes), unless
// -rapid.checks or -rapid.steps were given.
func etcdRuns(t *testing.T, n int) {
	if os.Getenv("LOCKPROOF_DEEP") == "1" && !suitemain.ChecksGiven() {
		if err := flag.Set("rapid.checks", "40"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = flag.Set("rapid.checks", "500") })
	}
	suitemain.SetChecks(t, n)
	setSteps(t, 7)
}

// One run by default (about 5 s in real time); the etcd cells of
// lockproof check and CI's real-server step run more.
func TestEtcdLockKeepsItsProperties(t *testing.T) {
	etcdRuns(t, 1)
	rep := propertytest.Run(t, EtcdLock(), EtcdLockOptions())
	checkedEveryRun(t, rep, propertytest.Exclusivity, propertytest.DeadlockFreedom)
	t.Logf("runs %d, named checks %v, expected violations (unclaimed lease revoke) %v", rep.Runs, rep.Checked, rep.Expected)
}

func TestEtcdLockOnRealServer(t *testing.T) {
	env := os.Getenv(etcdfake.EnvEndpoints)
	if env == "" {
		t.Skipf("set %s to run the suite on a real etcd", etcdfake.EnvEndpoints)
	}
	etcdRuns(t, 2)
	propertytest.Run(t, EtcdLockOn(strings.Split(env, ",")), EtcdLockOnOptions())
}

// TestEtcdLockOnAnEmbeddedMember smoke-tests EtcdLockOn's real-cluster
// path against an embedded member reached by its endpoint: a lock taken and
// released, the run's keys deleted at its end.
func TestEtcdLockOnAnEmbeddedMember(t *testing.T) {
	s := etcdfake.New(t)
	t.Run("run", func(t *testing.T) {
		be, err := EtcdLockOn(s.Endpoints())(t)
		if err != nil {
			t.Fatal(err)
		}
		smokeLock(t, be)
	})
	// Every fake's prefix starts so; the outer fake wrote nothing.
	resp, err := s.Client().Get(t.Context(), "lockproof-test-", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("keys left after the run: %v, %v", resp, err)
	}
}

func TestEtcdRWMutexKeepsItsProperties(t *testing.T) {
	skipEtcdRecipe(t)
	etcdRuns(t, 2)
	o := EtcdLockOptions()
	o.ReadWrite, o.Clients = true, 4
	rep := propertytest.Run(t, EtcdRWMutex(), o)
	checkedEveryRun(t, rep, propertytest.Exclusivity, propertytest.DeadlockFreedom)
	t.Logf("runs %d, named checks %v, undecided %d", rep.Runs, rep.Checked, rep.Undecided)
}

func TestEtcdSemaphoreKeepsItsProperties(t *testing.T) {
	skipEtcdRecipe(t)
	etcdRuns(t, 2)
	o := EtcdLockOptions()
	o.Permits = 2
	rep := propertytest.Run(t, EtcdSemaphore(2), o)
	checkedEveryRun(t, rep, propertytest.Exclusivity, propertytest.DeadlockFreedom)
	t.Logf("runs %d, named checks %v, undecided %d", rep.Runs, rep.Checked, rep.Undecided)
}
