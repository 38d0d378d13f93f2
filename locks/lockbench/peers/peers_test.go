package peers_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks/lockbench"
	"github.com/lockproof/lockproof/locks/lockbench/peers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each peer excludes, and its workers run through the harness.
func TestPeersExclude(t *testing.T) {
	for _, c := range []struct {
		name string
		ws   func(r *fakes.RedisServer) []lockbench.Worker
	}{
		{"redsync", func(r *fakes.RedisServer) []lockbench.Worker {
			return peers.Redsync(r.Client(), r.Prefix()+"redsync", 10*time.Second, 3)
		}},
		{"bsm", func(r *fakes.RedisServer) []lockbench.Worker {
			return peers.BSM(r.Client(), r.Prefix()+"bsm", 10*time.Second, 3)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := fakes.Redis(t)
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

func TestEtcdAndConsulPeersExclude(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Run("concurrency.Mutex", func(t *testing.T) {
		e := fakes.Etcd(t)
		ws := make([]lockbench.Worker, 3)
		for i := range ws {
			w, closeSession, err := peers.EtcdMutex(e.NewClient(), e.Prefix()+"mutex", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = closeSession() })
			ws[i] = w
		}
		if _, err := lockbench.Contend(ctx, ws, lockbench.Contention{Acquisitions: 30, Hold: 50 * time.Microsecond}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("api.Lock", func(t *testing.T) {
		c := fakes.Consul(t, fakes.ForceMiniconsul())
		ws, err := peers.ConsulLock(c.Client(), c.Prefix()+"lock", 10*time.Second, 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lockbench.Contend(ctx, ws, lockbench.Contention{Acquisitions: 30, Hold: 50 * time.Microsecond, Turns: true}); err != nil {
			t.Fatal(err)
		}
	})
}
