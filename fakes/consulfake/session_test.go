package consulfake_test

import (
	"errors"
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/consulfake"
)

// ExpireSession ends a live session and reports an unknown one as
// fakes.ErrNoSession, also when asked twice for the same session.
func TestExpireSessionUnknown(t *testing.T) {
	c := consulfake.New(t, consulfake.ForceMiniconsul())
	id, _, err := c.Client().Session().Create(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ExpireSession(id); err != nil {
		t.Fatalf("ExpireSession(live): %v", err)
	}
	if err := c.ExpireSession(id); !errors.Is(err, fakes.ErrNoSession) {
		t.Fatalf("ExpireSession(expired) = %v, want fakes.ErrNoSession", err)
	}
	if err := c.ExpireSession("no-such-session"); !errors.Is(err, fakes.ErrNoSession) {
		t.Fatalf("ExpireSession(unknown) = %v, want fakes.ErrNoSession", err)
	}
}
