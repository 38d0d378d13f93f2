package mutants

import (
	"context"
	"testing"
	"time"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
)

// The read-write mutants' reported bugs walked through.

// rw returns a client of s as its two modes.
func (s *scene) rw(l locks.Locker) (read, write locks.Locker) {
	s.t.Helper()
	v, ok := l.(propertytest.ReadWriteLocker)
	if !ok {
		s.t.Fatalf("%T is no ReadWriteLocker", l)
	}
	return v.RLocker(), v
}

// A reader that renewed half a TTL in still holds past its first TTL: a
// writer must be refused then.
func TestRWRenewedReaderHolds(t *testing.T) {
	reported(t, "rw-reader-renewal-misses-its-lease", func(s *scene) bool {
		read, _ := s.rw(s.client(nil))
		a := s.grant(read)
		s.be.Advance(testTTL / 2)
		if err := a.Renew(context.Background()); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		s.be.Advance(testTTL/2 + time.Millisecond)
		_, write := s.rw(s.client(nil))
		_, err := write.TryLock(context.Background())
		return err == nil && s.holds(a)
	})
}

// A reader's TryLock that stalls after its first request while a writer
// takes the lock must not be granted too.
func TestRWReaderStalledWhileWriterTakesIt(t *testing.T) {
	reported(t, "rw-reader-check-then-join", func(s *scene) bool {
		read, _ := s.rw(s.gated())
		first := s.grant(read) // loads the scripts: the requests below are EVALSHAs
		if err := first.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		var w locks.Lease
		ctx := stallAt(func() {
			_, write := s.rw(s.client(nil))
			w = s.grant(write)
		}, "evalsha", "evalsha")
		r, err := read.TryLock(ctx)
		return err == nil && w != nil && s.holds(r) && s.holds(w)
	})
}

// A reader whose lease ran out while a writer took the lock unlocks: the
// writer must still hold, and a third client be refused.
func TestRWStaleReaderUnlocksUnderAWriter(t *testing.T) {
	reported(t, "rw-read-unlock-deletes-lock", func(s *scene) bool {
		read, _ := s.rw(s.client(nil))
		stale := s.grant(read)
		s.be.Advance(testTTL + time.Millisecond)
		_, write := s.rw(s.client(nil))
		w := s.grant(write)
		_ = stale.Unlock(context.Background()) // ran out: its error is not the point
		_, third := s.rw(s.client(nil))
		_, err := third.TryLock(context.Background())
		return err == nil && s.holds(w)
	})
}
