package mysqllock

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// TestMaxHold: the row's expiry follows the server's clock, so only the
// lockers' clock is manual; the 10 s TTL is far from running out in wall
// time.
func TestMaxHold(t *testing.T) {
	s := newServer(t)
	clock := fakes.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	locktest.MaxHold(t, clock, clock.Advance, 3*time.Second,
		newLocker(t, openDB(t, s), "job", locks.WithClock(clock), locks.WithMaxHold(3*time.Second)),
		newLocker(t, openDB(t, s), "job", locks.WithClock(clock)))
}

func TestReentrantByOwner(t *testing.T) {
	s := newServer(t)
	locktest.Reentrant(t, newLocker(t, openDB(t, s), "job", locks.WithOwner("job-7")),
		newLocker(t, openDB(t, s), "job"), newLocker(t, openDB(t, s), "job", locks.WithOwner("job-7")))
}
