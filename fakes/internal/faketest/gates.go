package faketest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// RecordingGate is a locks.Gate that records the name of every request and
// counts those whose done function has not been called yet.
type RecordingGate struct {
	mu      sync.Mutex
	seen    []string
	open    int
	doubles int // done functions called more than once
}

// Request records what and returns the function that marks it over.
func (g *RecordingGate) Request(_ context.Context, what string) func() {
	g.mu.Lock()
	g.seen = append(g.seen, what)
	g.open++
	g.mu.Unlock()
	called := false
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if called {
			g.doubles++
			return
		}
		called = true
		g.open--
	}
}

// Names returns the requests seen so far; it fails t if one of them has not
// been told it is over, or has been told twice.
func (g *RecordingGate) Names(t *testing.T, op string) []string {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open != 0 || g.doubles != 0 {
		t.Errorf("%s: %d request(s) of %v still open, %d done twice after the operation returned", op, g.open, g.seen, g.doubles)
	}
	return slices.Clone(g.seen)
}

// opTimeout bounds each operation of these tests.
const opTimeout = 10 * time.Second

// GatedRun runs Lock, Renew and Unlock on l, each with a recordingGate of
// its own in its context, and returns, per operation, the names the gate
// saw ("lock: redis node 0: EVALSHA"). It fails t if an operation fails, if
// one made no request, or if a request was not closed once. With sorted,
// the names of each operation are sorted: requests sent in parallel arrive
// in any order.
func GatedRun(t *testing.T, l locks.Locker, sorted bool) []string {
	t.Helper()
	var all []string
	run := func(op string, f func(ctx context.Context) error) {
		t.Helper()
		g := &RecordingGate{}
		ctx, cancel := context.WithTimeout(locks.WithGate(context.Background(), g), opTimeout)
		defer cancel()
		if err := f(ctx); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		names := g.Names(t, op)
		if len(names) == 0 {
			t.Errorf("%s: the gate saw no request", op)
		}
		if sorted {
			slices.Sort(names)
		}
		for _, n := range names {
			all = append(all, op+": "+n)
		}
	}
	var lease locks.Lease
	run("lock", func(ctx context.Context) (err error) { lease, err = l.Lock(ctx); return err })
	run("renew", func(ctx context.Context) error { return lease.Renew(ctx) })
	run("unlock", func(ctx context.Context) error { return lease.Unlock(ctx) })
	return all
}

// UngatedRun runs Lock, Renew and Unlock on l without a gate: they must work
// as before.
func UngatedRun(t *testing.T, l locks.Locker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	lease, err := l.Lock(ctx)
	if err != nil {
		t.Fatalf("ungated lock: %v", err)
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("ungated renew: %v", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("ungated unlock: %v", err)
	}
}

// SameNames fails t unless two runs of the same operations on two fresh
// servers saw the same requests.
func SameNames(t *testing.T, a, b []string) {
	t.Helper()
	if !slices.Equal(a, b) {
		t.Errorf("the requests differ between two fresh servers:\n first: %q\nsecond: %q", a, b)
	}
	t.Logf("requests: %q", a)
}

// holdingGate holds the first request it is asked about until release is
// closed, after telling arrived its name; later requests go at once.
type holdingGate struct {
	arrived chan string
	release chan struct{}
	once    sync.Once
}

func newHoldingGate() *holdingGate {
	return &holdingGate{arrived: make(chan string, 1), release: make(chan struct{})}
}

func (g *holdingGate) Request(ctx context.Context, what string) func() {
	first := false
	g.once.Do(func() { first = true })
	if first {
		g.arrived <- what
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	}
	return func() {}
}

// HeldLock starts l.Lock with a holdingGate and waits until its first
// request is held. check runs while it is held and must find that the
// request has not reached the server; then the gate lets go and the lock
// must be granted. It fails t if the operation ends while held.
func HeldLock(t *testing.T, l locks.Locker, check func() error) {
	t.Helper()
	g := newHoldingGate()
	ctx, cancel := context.WithTimeout(locks.WithGate(context.Background(), g), opTimeout)
	defer cancel()
	type outcome struct {
		lease locks.Lease
		err   error
	}
	result := make(chan outcome, 1)
	go func() {
		lease, err := l.Lock(ctx)
		result <- outcome{lease, err}
	}()
	var what string
	select {
	case what = <-g.arrived:
	case r := <-result:
		t.Fatalf("Lock returned (%v) without asking the gate", r.err)
	}
	if err := check(); err != nil {
		t.Errorf("while %q is held: %v", what, err)
	}
	select {
	case r := <-result:
		t.Fatalf("Lock returned (%v) while the gate held %q", r.err, what)
	default:
	}
	close(g.release)
	r := <-result
	if r.err != nil {
		t.Fatalf("Lock after the gate let %q go: %v", what, r.err)
	}
	if err := r.lease.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// GateEpoch is the start of the manual clocks in the gate tests.
var GateEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
