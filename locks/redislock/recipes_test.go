package redislock

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// client returns a Locker of the lock "job" on a client of its own, as
// another process would have.
func client(t *testing.T, r *redisfake.Server, opts ...locks.Option) *Locker {
	t.Helper()
	l, err := New(r.NewClient(), "job", append(r.LockOptions(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestMaxHold(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(epoch))
	ttl := locks.WithTTL(10 * time.Second)
	locktest.MaxHold(t, r.Clock(), r.Advance, 3*time.Second,
		client(t, r, ttl, locks.WithMaxHold(3*time.Second)), client(t, r, ttl))
}

func TestReentrantByOwner(t *testing.T) {
	r := redisfake.New(t, redisfake.ManualTime(epoch))
	locktest.Reentrant(t, client(t, r, locks.WithOwner("job-7")),
		client(t, r), client(t, r, locks.WithOwner("job-7")))
}
