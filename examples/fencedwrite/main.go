// Command fencedwrite shows why a lock needs a fencing token. A holder is
// paused (a GC pause, a swapped-out VM) for longer than its lease; the lock
// expires, a second client takes it and writes; then the first wakes up and
// writes too, believing it still holds the lock.
//
// Storage that checks the tokens (a locks.Fence) refuses the late write;
// storage that trusts whoever writes loses the second client's update. Time
// is simulated: the run takes milliseconds.
//
// The program exits with status 1 unless the fenced storage refused the
// stale write and kept the newer value.
//
//	go run ./examples/fencedwrite
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
)

func main() {
	rep, err := Run(context.Background(), os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fencedwrite: %v\n", err)
		os.Exit(1)
	}
	if !rep.OK() {
		os.Exit(1)
	}
}

// Storage is where the holders write: fenced or trusting.
type Storage interface {
	Write(tok locks.Token, v string) error
	Value() string
}

// trusting accepts any write.
type trusting struct {
	mu sync.Mutex
	v  string
}

func (s *trusting) Write(_ locks.Token, v string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v = v
	return nil
}

func (s *trusting) Value() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v
}

// fenced refuses tokens below the highest it has seen.
type fenced struct{ f locks.Fence[string] }

func (s *fenced) Write(tok locks.Token, v string) error { return s.f.Write(tok, v) }
func (s *fenced) Value() string                         { return s.f.Value() }

// Outcome is what one storage ended up with.
type Outcome struct {
	LateWrite error  // the paused holder's write: nil if accepted
	Final     string // the value stored at the end
}

// Report holds both outcomes.
type Report struct {
	Trusting, Fenced Outcome
}

// OK reports whether the fenced storage refused the stale write and kept B's.
func (r Report) OK() bool {
	return errors.Is(r.Fenced.LateWrite, locks.ErrStaleToken) && r.Fenced.Final == "B"
}

// Run plays the scenario against both storages and narrates it to w.
func Run(ctx context.Context, w io.Writer) (Report, error) {
	var rep Report
	var err error
	fmt.Fprintln(w, "storage that trusts every writer:")
	if rep.Trusting, err = play(ctx, &trusting{}, w); err != nil {
		return rep, err
	}
	fmt.Fprintln(w, "storage that checks fencing tokens:")
	if rep.Fenced, err = play(ctx, &fenced{}, w); err != nil {
		return rep, err
	}
	return rep, nil
}

const ttl = 10 * time.Second

// play runs A's pause and B's takeover against store.
func play(ctx context.Context, store Storage, w io.Writer) (Outcome, error) {
	srv, err := miniredis.Run()
	if err != nil {
		return Outcome{}, err
	}
	defer srv.Close()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	srv.SetTime(start)
	clock := fakes.NewClock(start)
	advance := func(d time.Duration) { // the server's TTLs and the clients' clock together
		srv.FastForward(d)
		srv.SetTime(clock.Now().Add(d))
		clock.Advance(d)
	}
	var clients []*redis.Client
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	newLocker := func(obs locks.Observer) (*redislock.Locker, error) {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		clients = append(clients, c)
		opts := []locks.Option{locks.WithTTL(ttl), locks.WithClock(clock)}
		if obs != nil {
			opts = append(opts, locks.WithObserver(obs))
		}
		return redislock.New(c, "invoice-7", opts...)
	}
	pause := chaos.PauseAt(locks.PointBeforeWrite, 3*ttl, clock)
	a, err := newLocker(pause)
	if err != nil {
		return Outcome{}, err
	}
	b, err := newLocker(nil)
	if err != nil {
		return Outcome{}, err
	}

	leaseA, err := a.Lock(ctx)
	if err != nil {
		return Outcome{}, err
	}
	tokA, _ := leaseA.Token()
	fmt.Fprintf(w, "  A holds the lock (token %d) and pauses before writing\n", tokA)
	lateWrite := make(chan error, 1)
	go func() {
		locks.Observe(ctx, pause, locks.Event{Point: locks.PointBeforeWrite, Name: "invoice-7", Token: tokA, Fenced: true})
		lateWrite <- store.Write(tokA, "A")
	}()
	<-pause.Started()
	advance(ttl + 20*time.Millisecond)
	<-leaseA.Done()
	fmt.Fprintf(w, "  %v later A's lease has expired; A does not know, it is paused\n", ttl)

	leaseB, err := b.TryLock(ctx)
	if err != nil {
		return Outcome{}, fmt.Errorf("client B, after A's lease expired: %w", err)
	}
	tokB, _ := leaseB.Token()
	if err := store.Write(tokB, "B"); err != nil {
		return Outcome{}, fmt.Errorf("client B's write: %w", err)
	}
	fmt.Fprintf(w, "  B takes the lock (token %d) and writes \"B\"\n", tokB)
	_ = leaseB.Unlock(ctx)

	advance(3 * ttl)
	out := Outcome{LateWrite: <-lateWrite, Final: store.Value()}
	if out.LateWrite == nil {
		fmt.Fprintln(w, "  A wakes up and writes \"A\": accepted")
	} else {
		fmt.Fprintf(w, "  A wakes up and writes \"A\": refused (%v)\n", out.LateWrite)
	}
	fmt.Fprintf(w, "  stored: %q\n", out.Final)
	_ = leaseA.Unlock(ctx)
	return out, nil
}
