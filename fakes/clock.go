package fakes

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// Clock is a manual locks.Clock: time stands still until Advance moves it,
// and timers fire in deadline order as it passes them. Pass it to a lock with
// locks.WithClock and move a backend's time with the same Advance (see
// RedisServer.Advance) so that TTLs run out without sleeping. Safe for
// concurrent use.
//
// AfterFunc callbacks run in their own goroutines, which may run after
// Advance has returned and then read Now as the end of the advance, not
// their own deadline. A lease's watchdog renews from such a callback and
// arms its next renewal only then: advance a watched lease in steps shorter
// than a third of its TTL, waiting (WaitTimers) for each renewal to re-arm.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	timers  map[*clockTimer]struct{}
	changed chan struct{} // closed and replaced whenever timers are added
	// dispatch starts the AfterFunc callbacks one Advance passed; nil:
	// each on a goroutine of its own (SetDispatch).
	dispatch func(fs []func())
}

// SetDispatch replaces how the AfterFunc callbacks that one Advance passes
// are started. By default each gets a goroutine of its own, started in
// deadline order (then in the order they were armed), and two of them
// then race. run receives them in that order, after Advance has released
// the clock, on the goroutine that called Advance, and must see that each
// runs: propertytest starts each and waits until the process is
// quiescent before it starts the next, so that two leases' watchdogs due
// in the same advance renew in the same order in every replay of a seed.
// nil restores the default.
func (c *Clock) SetDispatch(run func(fs []func())) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dispatch = run
}

var _ locks.Clock = (*Clock)(nil)

// NewClock returns a manual clock reading start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, timers: map[*clockTimer]struct{}{}, changed: make(chan struct{})}
}

type clockTimer struct {
	c    *Clock
	at   time.Time
	seq  uint64
	ch   chan time.Time // for NewTimer
	f    func()         // for AfterFunc
	done bool
}

func (t *clockTimer) C() <-chan time.Time { return t.ch }

func (t *clockTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	delete(t.c.timers, t)
	return true
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that sends on C once the clock passes now+d.
func (c *Clock) NewTimer(d time.Duration) locks.Timer {
	return c.add(d, make(chan time.Time, 1), nil)
}

// AfterFunc calls f in its own goroutine once the clock passes now+d.
func (c *Clock) AfterFunc(d time.Duration, f func()) locks.Timer {
	return c.add(d, nil, f)
}

func (c *Clock) add(d time.Duration, ch chan time.Time, f func()) *clockTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &clockTimer{c: c, at: c.now.Add(d), seq: c.seq, ch: ch, f: f}
	if d <= 0 {
		c.fireLocked(t)
		return t
	}
	c.timers[t] = struct{}{}
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

func (c *Clock) fireLocked(t *clockTimer) {
	t.done = true
	delete(c.timers, t)
	if t.ch != nil {
		t.ch <- c.now
	} else {
		go t.f()
	}
}

// Advance moves the clock forward by d, firing every timer due on the way in
// deadline order, each with the clock reading its own deadline.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	var fs []func()
	for {
		due := c.dueLocked(end)
		if len(due) == 0 {
			break
		}
		for _, t := range due {
			c.now = t.at
			if t.ch != nil {
				c.fireLocked(t)
				continue
			}
			t.done = true
			delete(c.timers, t)
			fs = append(fs, t.f)
		}
	}
	c.now = end
	run := c.dispatch
	c.mu.Unlock()
	if len(fs) == 0 {
		return
	}
	if run != nil {
		run(fs)
		return
	}
	for _, f := range fs {
		go f()
	}
}

func (c *Clock) dueLocked(end time.Time) []*clockTimer {
	var due []*clockTimer
	for t := range c.timers {
		if !t.at.After(end) {
			due = append(due, t)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		if !due[i].at.Equal(due[j].at) {
			return due[i].at.Before(due[j].at)
		}
		return due[i].seq < due[j].seq
	})
	return due
}

// Pending returns the number of timers not yet fired or stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitTimers blocks until at least n timers are pending or ctx ends. A test
// calls it before Advance to be sure a goroutine has armed the timer it waits
// on, so the advance cannot slip in before it.
func (c *Clock) WaitTimers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.timers) >= n {
			c.mu.Unlock()
			return nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
