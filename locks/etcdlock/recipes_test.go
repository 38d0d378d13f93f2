package etcdlock

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// client returns a Locker of the lock "job" on a client of its own, as
// another process would have.
func client(t *testing.T, s *etcdfake.Server, opts ...locks.Option) *Locker {
	t.Helper()
	l, err := New(s.NewClient(), "job", append(s.LockOptions(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestMaxHold: etcd's leases run on the server's clock, so only the
// lockers' clock is manual; the lease's TTL (10 s) is far from running out
// in wall time.
func TestMaxHold(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	clock := fakes.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ttl := locks.WithTTL(10 * time.Second)
	locktest.MaxHold(t, clock, clock.Advance, 3*time.Second,
		client(t, s, ttl, locks.WithClock(clock), locks.WithMaxHold(3*time.Second)),
		client(t, s, ttl, locks.WithClock(clock)))
}

func TestReentrantByOwner(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
	locktest.Reentrant(t, client(t, s, locks.WithOwner("job-7")),
		client(t, s), client(t, s, locks.WithOwner("job-7")))
}
