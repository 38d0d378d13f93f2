package locktest

import (
	"testing"
	"time"
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
