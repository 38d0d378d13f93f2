package consullock

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

func TestMaxHold(t *testing.T) {
	c := server(t)
	locktest.MaxHold(t, c.Clock(), c.Advance, 3*time.Second,
		newLocker(t, c, c.NewClient(), "job", Session{}, locks.WithMaxHold(3*time.Second)),
		newLocker(t, c, c.NewClient(), "job", Session{}))
}

func TestReentrantByOwner(t *testing.T) {
	c := server(t)
	locktest.Reentrant(t, newLocker(t, c, c.NewClient(), "job", Session{}, locks.WithOwner("job-7")),
		newLocker(t, c, c.NewClient(), "job", Session{}),
		newLocker(t, c, c.NewClient(), "job", Session{}, locks.WithOwner("job-7")))
}
