package faketest

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
)

// ExpireAndRetake is the body the backend packages' Examples share: it
// takes l, ends the lease from outside with server.ExpireLock, shows that
// a second ExpireLock finds nobody holding the lock, runs between (a
// backend's own step, such as waiting out Consul's lock-delay; may be nil)
// and takes the lock again, printing each outcome.
func ExpireAndRetake(ctx context.Context, server fakes.Server, l locks.Locker, name string, between func()) {
	lease, err := l.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("expired:", server.ExpireLock(ctx, name))
	_ = lease.Unlock(ctx) // its lease is gone: the error says so
	err = server.ExpireLock(ctx, name)
	fmt.Println("again, nobody holds it:", errors.Is(err, fakes.ErrNoHolder))
	if between != nil {
		between()
	}
	lease, err = l.TryLock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("taken again:", lease.Unlock(ctx))
}
