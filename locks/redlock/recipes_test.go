package redlock

import (
	"testing"

	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// Redlock gives no fencing token: the checks compare none.

func TestMaxHold(t *testing.T) {
	g, clock := manual(t, 3)
	bound := 3 * testTTL / 10 // the request timeout; below TTL/3
	locktest.MaxHold(t, clock, g.Advance, bound,
		newLocker(t, g, g.NewClients(), locks.WithMaxHold(bound)), newLocker(t, g, g.NewClients()))
}

func TestReentrantByOwner(t *testing.T) {
	g, _ := manual(t, 3)
	locktest.Reentrant(t, newLocker(t, g, g.NewClients(), locks.WithOwner("job-7")),
		newLocker(t, g, g.NewClients()), newLocker(t, g, g.NewClients(), locks.WithOwner("job-7")))
}
