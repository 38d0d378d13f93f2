package mutants

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// The semaphore mutants' reported bugs walked through on a semaphore of
// semPermits = 2 permits.

// A renewal stalled until every permit expired and went to other clients
// must not report success.
func TestSemaphoreStalledRenewal(t *testing.T) {
	reported(t, "semaphore-renewal-resurrects", func(s *scene) bool {
		var c, d locks.Lease
		others := s.client(nil)
		a := s.client(onceAt(locks.PointBeforeRenew, func() {
			s.be.Advance(testTTL + time.Millisecond)
			c, d = s.grant(others), s.grant(others)
		}))
		held := s.grant(a)
		s.grant(others)
		err := held.Renew(context.Background())
		return err == nil && s.holds(c) && s.holds(d)
	})
}

// Permits whose holders crashed are free again after their TTL.
func TestSemaphoreCrashedHoldersFreePermits(t *testing.T) {
	reported(t, "semaphore-permits-never-expire", func(s *scene) bool {
		crashed := s.client(nil)
		s.grant(crashed)
		s.grant(crashed)
		if _, err := s.client(nil).TryLock(context.Background()); !errors.Is(err, locks.ErrLocked) {
			t.Fatalf("TryLock with both permits held: %v, want locks.ErrLocked", err)
		}
		s.be.Advance(testTTL + time.Millisecond)
		_, err := s.client(nil).TryLock(context.Background())
		return errors.Is(err, locks.ErrLocked)
	})
}

// An acquire that stalls after counting the permits, while another client
// takes the last free one, must not take a permit too.
func TestSemaphoreStalledAfterCount(t *testing.T) {
	reported(t, "semaphore-count-then-add", func(s *scene) bool {
		a := s.grant(s.client(nil)) // loads the scripts: the requests below are EVALSHAs
		var c locks.Lease
		ctx := stallAt(func() { c = s.grant(s.client(nil)) }, "evalsha", "evalsha")
		b, err := s.gated().TryLock(ctx)
		return err == nil && c != nil && s.holds(a) && s.holds(b) && s.holds(c)
	})
}
