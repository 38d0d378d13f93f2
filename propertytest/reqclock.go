package propertytest

import (
	"sync"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// requestClock is the clock on which an in-process run times its
// requests out (the operations' gates are locks.RequestClockers). It
// moves only when the scheduler finds the process quiescent while a
// request context's bound still runs: every connection is in memory, so
// nothing will ever answer that request, and its time runs out then, at
// a point the seed fixes. On wall time a request outside its gate for
// longer than RequestTimeout (a tenth of the TTL) timed out whenever a
// loaded machine ran the process slowly, and a create that zklock gave up
// on was still applied, its zxid moving the next fencing token.
type requestClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*requestTimer
}

var _ locks.Clock = (*requestClock)(nil)

// requestTimer is one timer of a requestClock.
type requestTimer struct {
	c   *requestClock
	due time.Time
	seq int
	f   func()         // AfterFunc's; nil for NewTimer's
	ch  chan time.Time // NewTimer's
}

// requestEpoch is where every run's request clock starts.
var requestEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func newRequestClock() *requestClock { return &requestClock{now: requestEpoch} }

// Now returns the clock's time.
func (c *requestClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that sends on its channel once fired.
func (c *requestClock) NewTimer(d time.Duration) locks.Timer {
	return c.add(d, nil, make(chan time.Time, 1))
}

// AfterFunc calls f on a goroutine of its own once fired.
func (c *requestClock) AfterFunc(d time.Duration, f func()) locks.Timer {
	return c.add(d, f, nil)
}

func (c *requestClock) add(d time.Duration, f func(), ch chan time.Time) *requestTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &requestTimer{c: c, due: c.now.Add(max(d, 0)), seq: c.seq, f: f, ch: ch}
	c.timers = append(c.timers, t)
	return t
}

// C returns the channel of a NewTimer's timer, nil for AfterFunc's.
func (t *requestTimer) C() <-chan time.Time { return t.ch }

// Stop removes the timer; it reports whether it was still pending.
func (t *requestTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// fireNext moves the clock to the earliest pending timer's time (the
// first made among equals) and fires it; false when none is pending.
func (c *requestClock) fireNext() bool {
	c.mu.Lock()
	if len(c.timers) == 0 {
		c.mu.Unlock()
		return false
	}
	next := 0
	for i, t := range c.timers {
		if t.due.Before(c.timers[next].due) {
			next = i
		}
	}
	t := c.timers[next]
	c.timers = append(c.timers[:next], c.timers[next+1:]...)
	if t.due.After(c.now) {
		c.now = t.due
	}
	now := c.now
	c.mu.Unlock()
	if t.f != nil {
		go t.f()
	} else {
		t.ch <- now
	}
	return true
}
