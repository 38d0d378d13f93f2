package peers

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/locks/lockbench"
)

// ConsulLock returns n workers on github.com/hashicorp/consul/api's Lock on
// key, one api.Lock each (it holds its state), all on client, with session
// TTL ttl and the library's other defaults: a loser of the acquire race
// that reads the key back free sleeps api.DefaultLockRetryTime (5 s).
func ConsulLock(client *api.Client, key string, ttl time.Duration, n int) ([]lockbench.Worker, error) {
	ws := make([]lockbench.Worker, n)
	for i := range ws {
		l, err := client.LockOpts(&api.LockOptions{Key: key, SessionTTL: ttl.String()})
		if err != nil {
			return nil, err
		}
		ws[i] = &consulLockWorker{l}
	}
	return ws, nil
}

type consulLockWorker struct{ l *api.Lock }

// Lock gives up when ctx ends: api.Lock stops on its Done channel and
// returns no error then.
func (w *consulLockWorker) Lock(ctx context.Context) error {
	ch, err := w.l.Lock(ctx.Done())
	if err == nil && ch == nil {
		err = fmt.Errorf("api.Lock: gave up: %w", ctx.Err())
	}
	return err
}

func (w *consulLockWorker) Unlock(context.Context) error { return w.l.Unlock() }
