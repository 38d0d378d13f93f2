package anyclock_test

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/anyclock"
)

func TestMain(m *testing.M) { fakes.VerifyNoLeaks(m) }

// A wrapped manual clock fires only on its Advance, stops as it does, and
// is found again under the wrapper; nil stays nil.
func TestWrap(t *testing.T) {
	if anyclock.Wrap[anyclock.Timer](nil) != nil {
		t.Fatal("Wrap(nil) is not nil")
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	manual := fakes.NewClock(start)
	manual.SetDispatch(func(fs []func()) { // run due callbacks before Advance returns
		for _, f := range fs {
			f()
		}
	})
	c := anyclock.Wrap(manual)
	if !c.Now().Equal(start) {
		t.Fatalf("Now() = %v, want %v", c.Now(), start)
	}
	fired, stopped := 0, 0
	c.AfterFunc(time.Second, func() { fired++ })
	tm := c.AfterFunc(time.Second, func() { stopped++ })
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	manual.Advance(999 * time.Millisecond)
	if fired != 0 {
		t.Fatal("fired before its time")
	}
	manual.Advance(time.Millisecond)
	if fired != 1 || stopped != 0 {
		t.Fatalf("fired %d, stopped timer fired %d; want 1 and 0", fired, stopped)
	}
	if got, ok := anyclock.Underlying(c).(*fakes.Clock); !ok || got != manual {
		t.Fatalf("Underlying = %T, want the manual clock", anyclock.Underlying(c))
	}
	if _, ok := anyclock.Underlying(anyclock.System{}).(anyclock.System); !ok {
		t.Fatal("Underlying of an unwrapped clock is not the clock")
	}
}
