package locks

import "time"

// Clock is the source of time for leases, watchdogs and waiting. Tests inject
// a manual clock (fakes.Clock) so that TTLs pass without sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends on C after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine after d, unless stopped first.
	// The returned Timer's C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer that lockproof uses.
type Timer interface {
	// C is the channel the timer sends on; nil for AfterFunc timers.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped it.
	Stop() bool
}

// SystemClock is the wall clock, backed by the time package.
type SystemClock struct{}

var _ Clock = SystemClock{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (SystemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

// AfterFunc wraps time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer {
	return sysTimer{time.AfterFunc(d, f)}
}

type sysTimer struct{ t *time.Timer }

func (s sysTimer) C() <-chan time.Time { return s.t.C }
func (s sysTimer) Stop() bool          { return s.t.Stop() }
