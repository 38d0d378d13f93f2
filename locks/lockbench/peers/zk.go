package peers

import (
	"context"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/locks/lockbench"
)

// ZKLock returns a worker on github.com/go-zookeeper/zk's Lock on node path
// (created, with its parents, as persistent nodes where missing), over
// conn: give each worker a connection of its own, as W processes would
// have a session each. zk.Lock takes no context: Lock checks ctx before it
// starts and then waits until zk.Lock returns, which it does once it holds
// the lock or its connection fails or is closed.
func ZKLock(conn *zk.Conn, path string) lockbench.Worker {
	return &zkLockWorker{zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))}
}

type zkLockWorker struct{ l *zk.Lock }

func (w *zkLockWorker) Lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return w.l.Lock()
}

func (w *zkLockWorker) Unlock(context.Context) error { return w.l.Unlock() }
