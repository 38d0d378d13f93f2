package minizk_test

import (
	"sort"
	"sync"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// manualClock is a locks.Clock that moves only with Advance: the least
// that minizk's tests need. (fakes.Clock is the project's full one; this
// package's tests do not import package fakes, which imports minizk, to
// keep their build, and a fuzzing build above all, small.)
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

var _ locks.Clock = (*manualClock)(nil)

type manualTimer struct {
	c    *manualClock
	at   time.Time
	ch   chan time.Time
	f    func()
	done bool
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

func newManualClock(start time.Time) *manualClock { return &manualClock{now: start} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) NewTimer(d time.Duration) locks.Timer {
	return c.add(d, make(chan time.Time, 1), nil)
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) locks.Timer { return c.add(d, nil, f) }

func (c *manualClock) add(d time.Duration, ch chan time.Time, f func()) *manualTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), ch: ch, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock by d and fires, in deadline order, the timers
// that came due.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	var due, left []*manualTimer
	for _, t := range c.timers {
		switch {
		case t.done:
		case !t.at.After(c.now):
			t.done = true
			due = append(due, t)
		default:
			left = append(left, t)
		}
	}
	c.timers = left
	now := c.now
	c.mu.Unlock()
	for _, t := range due {
		if t.ch != nil {
			t.ch <- now
		} else {
			t.f()
		}
	}
}
