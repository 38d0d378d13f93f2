package zkfake_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/zkfake"
)

// ExpireSession ends a live session and reports an unknown one as
// fakes.ErrNoSession, also when asked twice for the same session.
func TestExpireSessionUnknown(t *testing.T) {
	z := zkfake.New(t, zkfake.ManualTime(faketest.Epoch), zkfake.ForceMinizk())
	c, _, err := z.Connect(4 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := c.SessionID()
	if err := z.ExpireSession(id); err != nil {
		t.Fatalf("ExpireSession(live): %v", err)
	}
	if err := z.ExpireSession(id); !errors.Is(err, fakes.ErrNoSession) {
		t.Fatalf("ExpireSession(expired) = %v, want fakes.ErrNoSession", err)
	}
	if err := z.ExpireSession(12345); !errors.Is(err, fakes.ErrNoSession) {
		t.Fatalf("ExpireSession(unknown) = %v, want fakes.ErrNoSession", err)
	}
}
