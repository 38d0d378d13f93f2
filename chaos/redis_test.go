package chaos_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// register is the resource two clients increment: through a Fence, or as a
// plain value that trusts whoever writes.
type register interface {
	read(tok locks.Token) (int, error)
	write(tok locks.Token, v int) error
	value() int
}

type fenced struct{ f locks.Fence[int] }

func (r *fenced) read(tok locks.Token) (int, error)  { return r.f.Read(tok) }
func (r *fenced) write(tok locks.Token, v int) error { return r.f.Write(tok, v) }
func (r *fenced) value() int                         { return r.f.Value() }

type plain struct {
	mu sync.Mutex
	v  int
}

func (r *plain) read(locks.Token) (int, error) { r.mu.Lock(); defer r.mu.Unlock(); return r.v, nil }
func (r *plain) write(_ locks.Token, v int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.v = v
	return nil
}
func (r *plain) value() int { r.mu.Lock(); defer r.mu.Unlock(); return r.v }

// pausedHolder runs the scenario: holder A reads the register, pauses for
// three TTLs before its write (its watchdog frozen too), B acquires once A's
// key expires and increments; then A wakes and writes. It returns how many
// increments were reported successful and A's write error.
func pausedHolder(t *testing.T, reg register) (succeeded int, aErr error) {
	t.Helper()
	r := redisfake.New(t, redisfake.ManualTime(epoch))
	clock := r.Clock()
	const ttl = time.Second
	ctx := context.Background()
	pause := chaos.PauseAt(locks.PointBeforeWrite, 3*ttl, clock)
	a, err := redislock.New(r.Client(), "job", append(r.LockOptions(), locks.WithTTL(ttl), locks.WithObserver(pause))...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := redislock.New(r.NewClient(), "job", append(r.LockOptions(), locks.WithTTL(ttl))...)
	if err != nil {
		t.Fatal(err)
	}

	aDone := make(chan error, 1)
	go func() {
		lease, err := a.Lock(ctx)
		if err != nil {
			aDone <- err
			return
		}
		defer lease.Unlock(ctx)
		tok, _ := lease.Token()
		v, err := reg.read(tok)
		if err == nil {
			locks.Observe(ctx, pause, locks.Event{Point: locks.PointBeforeWrite, Name: "job", Token: tok, Fenced: true})
			err = reg.write(tok, v+1)
		}
		aDone <- err
	}()
	<-pause.Started()

	bDone := make(chan error, 1)
	go func() {
		lease, err := b.Lock(ctx)
		if err != nil {
			bDone <- err
			return
		}
		defer lease.Unlock(ctx)
		tok, _ := lease.Token()
		v, err := reg.read(tok)
		if err == nil {
			err = reg.write(tok, v+1)
		}
		bDone <- err
	}()
	// A's expiry and watchdog timers, the pause, B's re-check.
	if err := r.Clock().(*fakes.Clock).WaitTimers(ctx, 4); err != nil {
		t.Fatal(err)
	}
	r.Advance(ttl + 20*time.Millisecond) // A's key expires; B takes over
	if err := <-bDone; err != nil {
		t.Fatalf("B, after A's key expired: %v", err)
	}
	succeeded = 1
	r.Advance(3 * ttl) // A wakes up
	aErr = <-aDone
	if aErr == nil {
		succeeded++
	}
	return succeeded, aErr
}

// TestPausedHolderWithoutFenceLosesAnUpdate: the scenario is real — two
// increments both reported successful, one lost.
func TestPausedHolderWithoutFenceLosesAnUpdate(t *testing.T) {
	reg := &plain{}
	ok, aErr := pausedHolder(t, reg)
	if aErr != nil || ok != 2 {
		t.Fatalf("A's write: %v (%d increments succeeded); without a fence it must go through", aErr, ok)
	}
	if reg.value() != 1 {
		t.Fatalf("register = %d after 2 increments; the pause should have lost one", reg.value())
	}
}

// TestPausedHolderFenceRefusesTheStaleWrite: with the fence the paused
// holder's write is refused, so no increment that was reported is lost.
func TestPausedHolderFenceRefusesTheStaleWrite(t *testing.T) {
	reg := &fenced{}
	ok, aErr := pausedHolder(t, reg)
	if !errors.Is(aErr, locks.ErrStaleToken) {
		t.Fatalf("paused holder's write: %v, want ErrStaleToken", aErr)
	}
	if reg.value() != ok {
		t.Fatalf("register = %d after %d reported increments", reg.value(), ok)
	}
}
