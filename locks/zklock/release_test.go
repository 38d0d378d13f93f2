package zklock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks"
)

// TestUnlockAfterSessionExpiryReturns: a lease whose session the server
// expired has lost its node with the session; Unlock, even with a context
// that never ends and a clock that stands still, returns at once and says
// the lock was not held (it used to retry the delete until a TTL passed on
// the lock's clock, which in manual time never came). The expiry makes
// the connection reconnect, so the test skips under -race.
func TestUnlockAfterSessionExpiryReturns(t *testing.T) {
	skipReconnectsUnderRace(t)
	z := zkfake.New(t, zkfake.ForceMinizk(), zkfake.ManualTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	conn, _, err := z.Connect(sessionTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	l, err := New(conn, "expired", append(z.LockOptions(), locks.WithWatchdog(false))...)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := l.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := z.ExpireSession(conn.SessionID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Done():
	case <-time.After(testTimeout):
		t.Fatalf("the lease's Done did not close within %v of its session's expiry", testTimeout)
	}
	res := make(chan error, 1)
	go func() { res <- lease.Unlock(context.Background()) }()
	select {
	case err := <-res:
		if !errors.Is(err, locks.ErrNotHeld) {
			t.Fatalf("Unlock after the session expired: %v, want an error wrapping locks.ErrNotHeld", err)
		}
	case <-time.After(testTimeout):
		t.Fatalf("Unlock after the session expired has not returned within %v", testTimeout)
	}
}
