package chaos

import (
	"context"
	"sync"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// Pause is a locks.Observer that stops the client the first time it reaches
// a point, for a duration measured on a clock: a stop-the-world GC pause, a
// swapped-out process, a VM migration. While the pause lasts, every other
// observed point of the same client blocks too (its watchdog cannot renew
// in the middle of a stop-the-world pause). Give it to the lock with
// locks.WithObserver; callers that protect a write report
// locks.PointBeforeWrite themselves with locks.Observe.
type Pause struct {
	point locks.Point
	d     time.Duration
	clock locks.Clock

	once    sync.Once
	started chan struct{}
	ended   chan struct{}
}

var _ locks.Observer = (*Pause)(nil)

// PauseAt returns a Pause of d at point, timed by clock (nil: the system
// clock). A manual clock lets a test end the pause with Advance.
func PauseAt(point locks.Point, d time.Duration, clock locks.Clock) *Pause {
	if clock == nil {
		clock = locks.SystemClock{}
	}
	return &Pause{point: point, d: d, clock: clock, started: make(chan struct{}), ended: make(chan struct{})}
}

// Observe blocks the first call at the pause's point for its duration, and
// any call made while that pause lasts until it ends; each also returns when
// its ctx ends. Other calls return at once.
func (p *Pause) Observe(ctx context.Context, e locks.Event) {
	select {
	case <-p.started:
		select { // paused now, or already over
		case <-p.ended:
		case <-ctx.Done():
		}
		return
	default:
	}
	if e.Point != p.point {
		return
	}
	first := false
	p.once.Do(func() { first = true })
	if !first {
		select { // a concurrent call at the same point during the pause
		case <-p.ended:
		case <-ctx.Done():
		}
		return
	}
	close(p.started)
	defer close(p.ended)
	t := p.clock.NewTimer(p.d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
	}
}

// Started is closed when the client reaches the point and the pause begins.
func (p *Pause) Started() <-chan struct{} { return p.started }

// Ended is closed when the pause is over and the client runs again.
func (p *Pause) Ended() <-chan struct{} { return p.ended }
