package fakes_test

import (
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// fakes.MemLock's recipe checks, shared with the lock packages
// (internal/locktest). A MemLock is its own backend, so there is no other
// client to check against; the checks retake the lock through it.

func TestMemLockMaxHold(t *testing.T) {
	clock := fakes.NewClock(epoch)
	l, err := fakes.NewMemLock("job", locks.WithClock(clock), locks.WithMaxHold(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	locktest.MaxHold(t, clock, clock.Advance, time.Second, l)
}

func TestMemLockReentrantByOwner(t *testing.T) {
	l, err := fakes.NewMemLock("job", locks.WithClock(fakes.NewClock(epoch)), locks.WithOwner("job-7"))
	if err != nil {
		t.Fatal(err)
	}
	locktest.Reentrant(t, l)
}
