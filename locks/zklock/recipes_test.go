package zklock

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// TestMaxHold: a bound of a quarter of the session timeout, on a manual
// clock of the lockers' own (ZooKeeper's sessions keep the server's), ends
// the lease long before its session could time out in wall time.
func TestMaxHold(t *testing.T) {
	bound := sessionTimeout / 4
	clock := fakes.NewClock(time.Unix(0, 0))
	s := server(t)
	locktest.MaxHold(t, clock, clock.Advance, bound,
		s.newLocker(t, s.connect(t), "job", locks.WithClock(clock), locks.WithMaxHold(bound)),
		s.newLocker(t, s.connect(t), "job", locks.WithClock(clock)))
}

func TestReentrantByOwner(t *testing.T) {
	s := server(t)
	locktest.Reentrant(t, s.newLocker(t, s.connect(t), "job", locks.WithOwner("job-7")),
		s.newLocker(t, s.connect(t), "job"), s.newLocker(t, s.connect(t), "job", locks.WithOwner("job-7")))
}
