package chaos

import (
	"context"
	"sync"

	"github.com/lockproof/lockproof/locks"
)

// Crash is a locks.Observer that crashes a client: from the moment it
// crashes, every observed point of that client blocks until its ctx ends,
// so the watchdog never renews again (its context ends when the lease does)
// and an Unlock never reaches the backend. A test stops driving a crashed
// client, as a dead process would; its lease then expires on the backend.
type Crash struct {
	at      locks.Point
	once    sync.Once
	crashed chan struct{}
}

var _ locks.Observer = (*Crash)(nil)

// CrashAt returns a Crash that happens the first time the client reaches
// point, or only when Now is called if point is 0.
func CrashAt(point locks.Point) *Crash {
	return &Crash{at: point, crashed: make(chan struct{})}
}

// Now crashes the client at once.
func (c *Crash) Now() { c.once.Do(func() { close(c.crashed) }) }

// Crashed is closed once the client has crashed.
func (c *Crash) Crashed() <-chan struct{} { return c.crashed }

// Observe crashes the client at its point, and blocks every call made after
// the crash until the call's ctx ends.
func (c *Crash) Observe(ctx context.Context, e locks.Event) {
	if c.at != 0 && e.Point == c.at {
		c.Now()
	}
	select {
	case <-c.crashed:
		<-ctx.Done()
	default:
	}
}
