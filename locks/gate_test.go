package locks_test

import (
	"context"
	"sync"
	"testing"

	"github.com/lockproof/lockproof/locks"
)

type recordingGate struct {
	mu   sync.Mutex
	seen []string
	done int
}

func (g *recordingGate) Request(_ context.Context, what string) func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen = append(g.seen, what)
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.done++
	}
}

func TestGateRequest(t *testing.T) {
	// Without a gate: a no-op.
	locks.GateRequest(context.Background(), "x")()
	if locks.GateOf(context.Background()) != nil {
		t.Fatal("GateOf of a bare context is not nil")
	}
	g := &recordingGate{}
	ctx := locks.WithGate(context.Background(), g)
	derived, cancel := context.WithCancel(ctx)
	defer cancel()
	locks.GateRequest(derived, "a")()
	done := locks.GateRequest(ctx, "b")
	if g.done != 1 {
		t.Fatalf("done called %d times before the second request ended, want 1", g.done)
	}
	done()
	if len(g.seen) != 2 || g.seen[0] != "a" || g.seen[1] != "b" || g.done != 2 {
		t.Fatalf("gate saw %v with %d done, want [a b] and 2", g.seen, g.done)
	}
}
