package locks_test

import (
	"context"
	"slices"
	"testing"

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
