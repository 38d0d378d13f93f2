package locks_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// TestWithObserverAdds: observers given in several options are all called,
// in order; a nil one adds nothing; without any, Observer stays nil.
func TestWithObserverAdds(t *testing.T) {
	var got []string
	named := func(name string) locks.Observer {
		return locks.ObserverFunc(func(_ context.Context, e locks.Event) { got = append(got, name+":"+e.Name) })
	}
	o, err := locks.Resolve("p:", locks.WithObserver(named("a")), locks.WithObserver(nil),
		locks.WithObserver(named("b")), locks.WithObserver(named("c")))
	if err != nil {
		t.Fatal(err)
	}
	locks.Observe(context.Background(), o.Observer, locks.Event{Point: locks.PointAcquired, Name: "x"})
	if want := []string{"a:x", "b:x", "c:x"}; !slices.Equal(got, want) {
		t.Fatalf("observers called %v, want %v", got, want)
	}

	// Two locks resolved from a shared prefix of options keep their own chains.
	base := []locks.Option{locks.WithObserver(named("a"))}
	o1, _ := locks.Resolve("p:", append(base, locks.WithObserver(named("one")))...)
	o2, _ := locks.Resolve("p:", append(base, locks.WithObserver(named("two")))...)
	got = nil
	locks.Observe(context.Background(), o1.Observer, locks.Event{Name: "1"})
	locks.Observe(context.Background(), o2.Observer, locks.Event{Name: "2"})
	if want := []string{"a:1", "one:1", "a:2", "two:2"}; !slices.Equal(got, want) {
		t.Fatalf("observers called %v, want %v", got, want)
	}

	none, err := locks.Resolve("p:", locks.WithObserver(nil))
	if err != nil {
		t.Fatal(err)
	}
	if none.Observer != nil {
		t.Fatalf("Observer = %v, want nil", none.Observer)
	}
}

// Backoff doubles from 10 ms to 500 ms and adds up to half again of
// jitter, drawn from the lock's source: a seeded source repeats it.
func TestBackoff(t *testing.T) {
	o, err := locks.Resolve("p:", locks.WithRand(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := locks.Resolve("p:", locks.WithRand(rand.NewPCG(1, 2)))
	for _, c := range []struct {
		tries int
		base  time.Duration
	}{{1, 10 * time.Millisecond}, {2, 20 * time.Millisecond}, {6, 320 * time.Millisecond}, {7, 500 * time.Millisecond}, {40, 500 * time.Millisecond}} {
		d := o.Backoff(c.tries)
		if d < c.base || d > c.base+c.base/2 {
			t.Errorf("Backoff(%d) = %v, want within [%v, %v]", c.tries, d, c.base, c.base+c.base/2)
		}
		if d2 := again.Backoff(c.tries); d2 != d {
			t.Errorf("Backoff(%d) from the same seed: %v, then %v", c.tries, d, d2)
		}
	}
}
