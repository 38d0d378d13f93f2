package peers_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks/lockbench"
	"github.com/lockproof/lockproof/locks/lockbench/peers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, fakes.ZKFlushWedge()) } // go-zookeeper/zk#163

// Each peer excludes, and its workers run through the harness.
func TestPeersExclude(t *testing.T) {
	for _, c := range []struct {
		name string
		ws   func(r *redisfake.Server) []lockbench.Worker
	}{
		{"redsync", func(r *redisfake.Server) []lockbench.Worker {
			return peers.Redsync(r.Client(), r.Prefix()+"redsync", 10*time.Second, 3)
		}},
		{"bsm", func(r *redisfake.Server) []lockbench.Worker {
			return peers.BSM(r.Client(), r.Prefix()+"bsm", 10*time.Second, 3)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := redisfake.New(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := lockbench.Contend(ctx, c.ws(r), lockbench.Contention{Acquisitions: 60, Hold: 50 * time.Microsecond})
			if err != nil {
				t.Fatal(err)
			}
			if res.Acquisitions != 60 {
				t.Fatalf("%d acquisitions", res.Acquisitions)
			}
		})
	}
}

// The etcd and Consul peers exclude through the harness too. Their
// hand-offs cost wall time (a watch event through the embedded etcd
// member, tens of milliseconds; a blocking query of api.Lock on
// miniconsul, about 300 ms), so they contend for realTimeAcquisitions
// only: enough for every worker to wait, be handed the lock and release
// it.
func TestEtcdAndConsulPeersExclude(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Run("concurrency.Mutex", func(t *testing.T) {
		e := etcdfake.New(t)
		ws := make([]lockbench.Worker, 3)
		for i := range ws {
			w, closeSession, err := peers.EtcdMutex(e.NewClient(), e.Prefix()+"mutex", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = closeSession() })
			ws[i] = w
		}
		if _, err := lockbench.Contend(ctx, ws, lockbench.Contention{Acquisitions: realTimeAcquisitions, Hold: 50 * time.Microsecond}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("recipes.RWMutex writer", func(t *testing.T) {
		e := etcdfake.New(t)
		ws := make([]lockbench.Worker, 3)
		for i := range ws {
			w, closeSession, err := peers.EtcdRWMutexWriter(e.NewClient(), e.Prefix()+"rw", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = closeSession() })
			ws[i] = w
		}
		res, err := lockbench.Contend(ctx, ws, lockbench.Contention{Acquisitions: realTimeAcquisitions, Hold: 50 * time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.Acquisitions != realTimeAcquisitions {
			t.Fatalf("%d acquisitions", res.Acquisitions)
		}
	})
	t.Run("api.Lock", func(t *testing.T) {
		c := consulfake.New(t, consulfake.ForceMiniconsul())
		ws, err := peers.ConsulLock(c.Client(), c.Prefix()+"lock", 10*time.Second, 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lockbench.Contend(ctx, ws, lockbench.Contention{Acquisitions: realTimeAcquisitions, Hold: 50 * time.Microsecond, Turns: true}); err != nil {
			t.Fatal(err)
		}
	})
}

// realTimeAcquisitions is how many acquisitions the etcd peers contend
// for: a few turns for each of their three workers.
const realTimeAcquisitions = 12

// zk.Lock excludes through the harness, and the counter sees what its
// workers send and receive: a create and a delete per acquisition, and,
// with every hand-off to a waiter that watches its predecessor, watch
// events.
func TestZKLockPeerExcludesAndIsCounted(t *testing.T) {
	z := zkfake.New(t)
	var c peers.ZKCounter
	ws := make([]lockbench.Worker, 3)
	for i := range ws {
		conn, _, err := zk.Connect(z.Servers(), 10*time.Second, zk.WithDialer(c.Dial), zk.WithLogger(quiet{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		ws[i] = peers.ZKLock(conn, z.Prefix()+"/lock")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 30
	res, err := lockbench.Contend(ctx, ws, lockbench.Contention{Acquisitions: n, Hold: 50 * time.Microsecond, Turns: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Acquisitions != n {
		t.Fatalf("%d acquisitions", res.Acquisitions)
	}
	// Each acquisition creates a node and deletes one, but the counts are
	// not asserted exactly: under -race on a loaded CI machine one run
	// counted 36 creates and 29 deletes for 30 acquisitions (retried
	// creates, a delete still on its way). What is checked is that the
	// counts by opcode add up to the total and that creates were seen.
	ops := c.RequestsByOpcode()
	const create = 1
	if ops[create] == 0 {
		t.Errorf("no create counted for %d acquisitions (by opcode: %v)", n, ops)
	}
	var sum int64
	for _, k := range ops {
		sum += k
	}
	if sum != c.Requests() {
		t.Errorf("requests by opcode add up to %d, Requests() = %d", sum, c.Requests())
	}
	// No assertion on the watch events: a hand-off that finds the lock
	// free needs none, and on a loaded machine all 29 did (0 events). The
	// counting itself is tested on packet streams (zkcount_internal_test).
	t.Logf("requests by opcode: %v; %d watch events over %d hand-offs", ops, c.Events(), len(res.Handoffs))
	cancel()
	if err := ws[0].Lock(ctx); err == nil {
		t.Error("Lock with an ended context succeeded")
	}
}

// quiet discards go-zookeeper's log lines.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
