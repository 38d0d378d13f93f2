package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/locks"
)

func TestPercentileMs(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, ms(i))
	}
	for _, c := range []struct {
		in   []time.Duration
		p    int
		want float64
	}{
		{nil, 50, 0},
		{[]time.Duration{ms(7)}, 99, 7},
		{hundred, 50, 50},
		{hundred, 99, 99},
		{hundred, 100, 100},
		{[]time.Duration{ms(1), ms(2), ms(3)}, 50, 2},
		{[]time.Duration{ms(1), ms(2), ms(3)}, 0, 1},
	} {
		if got := PercentileMs(c.in, c.p); got != c.want {
			t.Errorf("PercentileMs(%d samples, p%d) = %v, want %v", len(c.in), c.p, got, c.want)
		}
	}
}

// oneShot is a Locker whose Lock returns once release is closed.
type oneShot struct{ release chan struct{} }

func (o oneShot) Lock(ctx context.Context) (locks.Lease, error) {
	select {
	case <-o.release:
		return nil, errors.New("released")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (o oneShot) TryLock(context.Context) (locks.Lease, error) { return nil, locks.ErrLocked }

func TestLockAsync(t *testing.T) {
	l := oneShot{release: make(chan struct{})}
	ch := LockAsync(context.Background(), l)
	select {
	case r := <-ch:
		t.Fatalf("Lock returned before its release: %v", r.Err)
	default:
	}
	close(l.release)
	Closed(t, "release", l.release)
	if r := Receive(t, ch); r.Err == nil || r.Err.Error() != "released" {
		t.Fatalf("Receive = %v, want the Lock's error", r.Err)
	}
}
