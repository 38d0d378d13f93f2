// Package anyclock lets minizk and miniconsul follow a clock of any
// package, without importing one: a clock is anything with Now and an
// AfterFunc whose timer can be stopped, whatever type that timer has.
package anyclock

import "time"

// Timer is what the servers need of a timer: a way to stop it. It is an
// alias, so that the servers' own Timer aliases are the same type.
type Timer = interface{ Stop() bool }

// Clock is a clock whose timers are Timers.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// wrapped is a clock whose timers are of type T, seen as a Clock.
type wrapped[T Timer] struct {
	c interface {
		Now() time.Time
		AfterFunc(d time.Duration, f func()) T
	}
}

func (w wrapped[T]) Now() time.Time { return w.c.Now() }

func (w wrapped[T]) AfterFunc(d time.Duration, f func()) Timer { return w.c.AfterFunc(d, f) }

// Wrap returns c as a Clock, or nil when c is nil.
func Wrap[T Timer](c interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) T
}) Clock {
	if c == nil {
		return nil
	}
	return wrapped[T]{c}
}

// Underlying returns the clock c wraps (c itself when it wraps none), for
// a type assertion on the caller's clock, as to a manual clock's Advance.
func Underlying(c Clock) any {
	type unwrapper interface{ underlying() any }
	if u, ok := c.(unwrapper); ok {
		return u.underlying()
	}
	return c
}

func (w wrapped[T]) underlying() any { return w.c }

// System is the wall clock of the time package.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// AfterFunc returns time.AfterFunc(d, f).
func (System) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
