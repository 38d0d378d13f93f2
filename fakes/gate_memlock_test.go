package fakes_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/locks"
)

func TestMemLockGate(t *testing.T) {
	newLock := func() *fakes.MemLock {
		l, err := fakes.NewMemLock("gated", locks.WithClock(fakes.NewClock(faketest.GateEpoch)))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	first := faketest.GatedRun(t, newLock(), false)
	want := []string{"lock: memlock acquire", "renew: memlock renew", "unlock: memlock release"}
	if !slices.Equal(first, want) {
		t.Errorf("the gate saw %q, want %q", first, want)
	}
	l := newLock()
	faketest.SameNames(t, first, faketest.GatedRun(t, l, false))
	faketest.UngatedRun(t, l)
}

func TestMemLockGateSeesEveryAttempt(t *testing.T) {
	l, err := fakes.NewMemLock("attempts", locks.WithClock(fakes.NewClock(faketest.GateEpoch)))
	if err != nil {
		t.Fatal(err)
	}
	holder, err := l.TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := &faketest.RecordingGate{}
	ctx := locks.WithGate(context.Background(), g)
	if _, err := l.TryLock(ctx); !errors.Is(err, locks.ErrLocked) {
		t.Fatalf("TryLock on a held lock: %v", err)
	}
	// A Lock that waits: its first attempt fails, the release wakes it, the
	// second succeeds.
	granted := make(chan error, 1)
	waiting := &attemptGate{RecordingGate: g, second: make(chan struct{})}
	go func() {
		lease, err := l.Lock(locks.WithGate(context.Background(), waiting))
		if err == nil {
			err = lease.Unlock(context.Background())
		}
		granted <- err
	}()
	<-waiting.second // the first attempt of Lock found the lock held
	if err := holder.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatalf("Lock after the release: %v", err)
	}
	got := g.Names(t, "trylock and lock")
	if want := []string{"memlock acquire", "memlock acquire", "memlock acquire"}; !slices.Equal(got, want) {
		t.Errorf("the gate saw %q, want %q", got, want)
	}
}

// attemptGate records into a faketest.RecordingGate, and closes second once the
// first attempt of its own operation has ended.
type attemptGate struct {
	*faketest.RecordingGate
	second chan struct{}
	n      int
}

func (g *attemptGate) Request(ctx context.Context, what string) func() {
	done := g.RecordingGate.Request(ctx, what)
	g.n++
	if g.n != 1 {
		return done
	}
	return func() { done(); close(g.second) }
}

func TestMemLockGateHoldsTheRequest(t *testing.T) {
	l, err := fakes.NewMemLock("held", locks.WithClock(fakes.NewClock(faketest.GateEpoch)))
	if err != nil {
		t.Fatal(err)
	}
	faketest.HeldLock(t, l, func() error {
		if _, held := l.Holder(); held {
			return errors.New("the lock is held")
		}
		return nil
	})
}
