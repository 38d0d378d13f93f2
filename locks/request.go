package locks

import (
	"context"
	"sync"
	"time"
)

// RequestContext bounds one request (or one round of requests sent
// together) to a backend by d, as context.WithTimeout does, with one
// difference: when ctx carries a Gate (see WithGate), the time during
// which a request made with the returned context is held at the Gate does
// not count. A Gate stands for a client stalled before it sends: in a
// property test the scheduler holds requests for as long as it decides
// the order of other clients' requests, which is wall time the run's
// clock never sees. Counting it would make a request's fate depend on how
// fast the machine ran the test, not on the test's seed.
//
// Without a Gate it is context.WithTimeout(ctx, d). Under a Gate the
// returned context reports no deadline (Deadline's ok is false: a client
// that sets socket deadlines from the context uses its own timeouts
// instead), is cancelled with ctx, and its Err is
// context.DeadlineExceeded once d of time outside the Gate has passed.
// Locks use it for every request they bound by Options.RequestTimeout.
//
// The time outside the Gate is wall time, unless the Gate is a
// RequestClocker that names a clock of its own.
func RequestContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	g := GateOf(ctx)
	if g == nil {
		return context.WithTimeout(ctx, d)
	}
	var clock Clock = SystemClock{}
	if rc, ok := g.(RequestClocker); ok {
		if c := rc.RequestClock(); c != nil {
			clock = c
		}
	}
	return heldContext(ctx, d, clock)
}

// RequestClocker is a Gate that also keeps the time of the requests it
// lets go: a RequestContext under it counts its bound on RequestClock
// (outside the Gate, as always) instead of wall time. A deterministic
// scheduler whose backends are all in memory uses it to time a request
// out only when nothing in the process can answer it any more, and not
// when a loaded machine is slow to. A nil clock means wall time.
type RequestClocker interface {
	Gate
	RequestClock() Clock
}

// heldContext is RequestContext under a Gate, on clock.
func heldContext(ctx context.Context, d time.Duration, clock Clock) (context.Context, context.CancelFunc) {
	c := &heldCtx{parent: ctx, clock: clock, done: make(chan struct{}), left: d, since: clock.Now()}
	// Set up under the lock: either callback may run at once (d ≤ 0, ctx
	// already ended), and it must find both set.
	c.mu.Lock()
	c.timer = clock.AfterFunc(d, c.expire)
	c.stopParent = context.AfterFunc(ctx, func() { c.end(ctx.Err()) })
	c.mu.Unlock()
	return c, func() { c.end(context.Canceled) }
}

// heldCtx is the context RequestContext returns under a Gate: its timer
// stops while any request made with it is held at the Gate.
type heldCtx struct {
	parent context.Context
	clock  Clock
	done   chan struct{}

	mu         sync.Mutex
	err        error
	held       int           // requests held at the gate now
	left       time.Duration // time left when the timer is stopped
	since      time.Time     // when the timer last started
	timer      Timer         // nil while held
	stopParent func() bool   // stops watching parent
}

// heldKey is the context key under which a heldCtx finds itself.
type heldKey struct{}

// Deadline reports none: the deadline moves while requests are held.
func (c *heldCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done is closed when the context ends.
func (c *heldCtx) Done() <-chan struct{} { return c.done }

// Err is nil until the context ends, then why it ended. A parent that
// ended ends it here at once, not only when context.AfterFunc's goroutine
// gets to it: a request let go by its gate just after its operation was
// cancelled (a crash) must see the end before it is sent, whichever
// goroutine runs first.
func (c *heldCtx) Err() error {
	if err := c.parent.Err(); err != nil {
		c.end(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value returns the heldCtx itself for heldKey, else ctx's value.
func (c *heldCtx) Value(key any) any {
	if key == (heldKey{}) {
		return c
	}
	return c.parent.Value(key)
}

// expire ends the context if its time really ran out: the timer may have
// fired just as a request was being held.
func (c *heldCtx) expire() {
	c.mu.Lock()
	if c.err != nil || c.held > 0 || c.clock.Now().Sub(c.since) < c.left {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.end(context.DeadlineExceeded)
}

// end ends the context with err, once.
func (c *heldCtx) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.timer != nil {
		c.timer.Stop()
	}
	stop := c.stopParent
	c.mu.Unlock()
	stop()
	close(c.done)
}

// hold stops the timer: a request made with c is held at the gate.
func (c *heldCtx) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held++
	if c.held > 1 || c.err != nil {
		return
	}
	c.timer.Stop()
	c.timer = nil
	c.left -= c.clock.Now().Sub(c.since)
}

// unhold starts the timer again once no request is held.
func (c *heldCtx) unhold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held--
	if c.held > 0 || c.err != nil {
		return
	}
	c.since = c.clock.Now()
	// Run out before the hold (left ≤ 0): the timer fires at once.
	c.timer = c.clock.AfterFunc(c.left, c.expire)
}
