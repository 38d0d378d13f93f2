package propertytest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/linearize"
	"github.com/lockproof/lockproof/locks"
)

func TestOutcomeClassification(t *testing.T) {
	cases := []struct {
		err     error
		ok      bool
		unknown bool
	}{
		{nil, true, false},
		{fmt.Errorf("x: %w", locks.ErrNotHeld), false, false},
		{fmt.Errorf("x: %w", locks.ErrLeaseExpired), false, true},
		{fmt.Errorf("x: %w", locks.ErrReleased), false, true},
		{context.DeadlineExceeded, false, true},
		{errors.New("connection reset"), false, true},
	}
	for _, c := range cases {
		out, unknown := releaseOutcome(c.err)
		if out.OK != c.ok || unknown != c.unknown {
			t.Errorf("releaseOutcome(%v) = %v, unknown %v; want ok %v unknown %v", c.err, out.OK, unknown, c.ok, c.unknown)
		}
	}
	if out, unknown := acquireOutcome(nil, fmt.Errorf("x: %w", locks.ErrLocked), nil); out.OK || unknown {
		t.Errorf("ErrLocked: %v unknown %v, want a known refusal", out, unknown)
	}
	if _, unknown := acquireOutcome(nil, fmt.Errorf("x: %w", locks.ErrLeaseExpired), nil); !unknown {
		t.Error("a grant that expired before hand-over must be unknown: the backend granted it")
	}
	l, err := fakes.NewMemLock("x", locks.WithClock(fakes.NewClock(epoch)), locks.WithWatchdog(false))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := l.TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out, unknown := acquireOutcome(lease, nil, nil); !out.OK || unknown || out.Token != 1 {
		t.Errorf("grant: %+v unknown %v, want ok with token 1", out, unknown)
	}
	if out, _ := acquireOutcome(unfencedLease{lease}, nil, func() uint64 { return 42 }); out.Token != 42 {
		t.Errorf("unfenced grant got token %d, want the synthetic 42", out.Token)
	}
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRegisterLostUpdates(t *testing.T) {
	var g register
	// Fenced: the stale write of a paused holder is refused, nothing lost.
	v1, w1, _ := g.read(1, true)
	v2, w2, _ := g.read(2, true)
	if !g.write(2, true, v2, w2, lostUpdate{}) {
		t.Fatal("the current holder's write was refused")
	}
	if g.write(1, true, v1, w1, lostUpdate{late: true}) {
		t.Fatal("a stale token's write was admitted")
	}
	if n := len(g.lostUpdates()); n != 0 {
		t.Fatalf("%d lost updates with fencing", n)
	}
	// Unfenced: A reads, B reads and writes, A (late) writes: B's update is
	// lost, blamed on A's pause. Then C reads and writes over nothing.
	a, wa, _ := g.read(0, false)
	b, wb, _ := g.read(0, false)
	g.write(0, false, b, wb, lostUpdate{client: 2})
	g.write(0, false, a, wa, lostUpdate{client: 1, late: true})
	lost := g.lostUpdates()
	if len(lost) != 1 || lost[0].client != 1 || !lost[0].late || lost[0].read != 1 || lost[0].over != 2 {
		t.Fatalf("lost updates %+v, want client 1 (late) writing over 2 after reading 1", lost)
	}
	// A timely writer that overwrites a late write: still blamed on the pause.
	var h register
	x, wx, _ := h.read(0, false)
	y, wy, _ := h.read(0, false)
	h.write(0, false, y, wy, lostUpdate{client: 1, late: true})
	h.write(0, false, x, wx, lostUpdate{client: 2})
	if lost := h.lostUpdates(); len(lost) != 1 || !lost[0].late {
		t.Fatalf("lost updates %+v, want one blamed on the late write it overwrote", lost)
	}
}

// The lease model's tolerance is exactly the locks' drift allowance: a
// grant to another owner at the holder's local deadline is legal, one
// just before it is a double grant.
func TestLeaseModelBoundary(t *testing.T) {
	ttl := time.Second
	model, err := linearize.NewLeaseModel(ttl, locks.Drift(ttl))
	if err != nil {
		t.Fatal(err)
	}
	deadline := int64(ttl - locks.Drift(ttl))
	for _, c := range []struct {
		at   int64
		want linearize.Verdict
	}{{deadline, linearize.Ok}, {deadline - 1, linearize.Illegal}} {
		h := []lockOp{
			{ID: 0, ClientID: 0, Call: 0, Return: 0, Input: linearize.LeaseInput{Lock: "l", Op: linearize.Acquire, Owner: 1},
				Output: linearize.LeaseOutput{OK: true, Token: 1}},
			{ID: 1, ClientID: 1, Call: c.at, Return: c.at, Input: linearize.LeaseInput{Lock: "l", Op: linearize.Acquire, Owner: 2},
				Output: linearize.LeaseOutput{OK: true, Token: 2}},
		}
		res, err := linearize.Check(context.Background(), model, h, linearize.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != c.want {
			t.Errorf("second grant at %v: %v, want %v", time.Duration(c.at), res.Verdict, c.want)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	if _, err := (Options{Clients: 1}).withDefaults(); err == nil {
		t.Error("one client accepted")
	}
	if _, err := (Options{TTL: time.Millisecond}).withDefaults(); err == nil {
		t.Error("a TTL below locks.MinTTL accepted")
	}
	o, err := (Options{}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Clients != 3 || o.TTL != time.Second || o.Slack != o.TTL/4 || !o.claims(FaultPause) || o.claims(FaultFailover) {
		t.Errorf("defaults %+v", o)
	}
	if err := (&Backend{}).validate(); err == nil {
		t.Error("an empty backend accepted")
	}
}

// unfencedLease hides a lease's fencing token, as a lock without fencing
// gives none.
type unfencedLease struct{ locks.Lease }

func (u unfencedLease) Token() (locks.Token, bool) { return 0, false }

// A non-linearizable lock history is blamed on the right property. The
// search gets stuck at the second grant in all three histories (with the
// renewals and the grant at one instant, it linearizes both renewals first,
// as many operations as it can); the grant is exclusivity's fault only if it
// stays illegal without the other owner's later successful renewals.
func TestLockIllegalBlame(t *testing.T) {
	ttl := time.Second
	model, err := linearize.NewLeaseModel(ttl, locks.Drift(ttl))
	if err != nil {
		t.Fatal(err)
	}
	op := func(id, client int, at time.Duration, kind linearize.LeaseOp, owner uint64, ok bool, tok uint64) lockOp {
		return lockOp{ID: id, ClientID: client, Call: int64(at), Return: int64(at),
			Input: linearize.LeaseInput{Lock: "l", Op: kind, Owner: owner}, Output: linearize.LeaseOutput{OK: ok, Token: tok}}
	}
	for _, c := range []struct {
		name string
		h    []lockOp
		want Property
	}{{
		// The mutant consul-ignores-session-invalidation: owner 1's lease
		// could have expired by 6.6s, so owner 3's grant is legal; owner
		// 1's renewals at the same instant are what is wrong.
		name: "renewals of an expired lease",
		h: []lockOp{
			op(0, 0, 3250*time.Millisecond, linearize.Acquire, 1, true, 2),
			op(1, 1, 6600*time.Millisecond, linearize.Acquire, 3, true, 7),
			op(2, 0, 6600*time.Millisecond, linearize.Renew, 1, true, 0),
			op(3, 0, 6600*time.Millisecond, linearize.Renew, 1, true, 0),
		},
		want: Symmetry,
	}, {
		// Owner 3 is granted the lock while owner 1's lease is valid,
		// whatever owner 1 did after.
		name: "double grant, holder renews after",
		h: []lockOp{
			op(0, 0, 0, linearize.Acquire, 1, true, 2),
			op(1, 1, 500*time.Millisecond, linearize.Acquire, 3, true, 7),
			op(2, 0, 500*time.Millisecond, linearize.Renew, 1, true, 0),
			op(3, 0, 500*time.Millisecond, linearize.Renew, 1, true, 0),
		},
		want: Exclusivity,
	}, {
		// Issue 18, item 6: owner 3's Lock was called at 0.2s and waited;
		// owner 1 renewed honestly at 0.5s, while it held the lock; the
		// Lock returned granted at 0.8s, within owner 1's lease. The
		// renewal returned after the grant was called, but it was made
		// before the grant returned: a real double grant, exclusivity.
		name: "double grant with an honest renewal in between",
		h: []lockOp{
			op(0, 0, 0, linearize.Acquire, 1, true, 2),
			{ID: 1, ClientID: 1, Call: int64(200 * time.Millisecond), Return: int64(800 * time.Millisecond),
				Input: linearize.LeaseInput{Lock: "l", Op: linearize.Acquire, Owner: 3}, Output: linearize.LeaseOutput{OK: true, Token: 7}},
			op(2, 0, 500*time.Millisecond, linearize.Renew, 1, true, 0),
		},
		want: Exclusivity,
	}, {
		name: "double grant",
		h: []lockOp{
			op(0, 0, 0, linearize.Acquire, 1, true, 2),
			op(1, 1, 500*time.Millisecond, linearize.Acquire, 3, true, 7),
		},
		want: Exclusivity,
	}} {
		t.Run(c.name, func(t *testing.T) {
			res, err := linearize.Check(context.Background(), model, c.h, linearize.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != linearize.Illegal {
				t.Fatalf("verdict %v, want Illegal", res.Verdict)
			}
			if c.h[res.Blocker].Input.Op != linearize.Acquire {
				t.Fatalf("stuck at %+v, want the second grant: the history no longer tests the grant's blame", c.h[res.Blocker])
			}
			o := Options{TTL: ttl, CheckTimeLimit: 10 * time.Second}
			in := historyInput{model: lockModel(o), opts: o.checkOptions()}
			if in.lock, err = linearize.Bind[linearize.LeaseInput, linearize.LeaseOutput](in.model); err != nil {
				t.Fatal(err)
			}
			if v := lockIllegal(context.Background(), in, c.h, &res); v.Property != c.want {
				t.Errorf("blamed on %s, want %s: %s", v.Property, c.want, v.Detail)
			}
		})
	}
}

// A crashed acquire of unknown outcome may have been cleaned up by the lock
// before its call returned (the DEEP run of consul-ignores-session-
// invalidation, seed 7839133332539522661: consullock's abandon released
// the key its cancelled Lock had acquired). With the recorder's unknown
// release after it the history is legal; without, the lease model holds the
// acquire for a whole TTL and the later grant reads as a double grant. A
// grant that returned is never followed by one.
func TestCrashedAcquireMayHaveBeenCleanedUp(t *testing.T) {
	ttl := time.Second
	model, err := linearize.NewLeaseModel(ttl, locks.Drift(ttl))
	if err != nil {
		t.Fatal(err)
	}
	clock := fakes.NewClock(time.Unix(0, 0))
	build := func(cleanUp bool) []lockOp {
		r := newRecorder(clock)
		crashed := r.call(0, linearize.Acquire, "l", 1)
		refused := r.call(1, linearize.Acquire, "l", 2)
		r.ret(refused, linearize.LeaseOutput{}, false)
		clock.Advance(333 * time.Millisecond)
		r.ret(crashed, linearize.LeaseOutput{}, true)
		if cleanUp {
			r.cleanedUp(crashed)
		}
		granted := r.call(2, linearize.Acquire, "l", 3)
		r.ret(granted, linearize.LeaseOutput{OK: true, Token: 12}, false)
		h, _, _ := r.histories()
		return h
	}
	for _, c := range []struct {
		cleanUp bool
		want    linearize.Verdict
	}{{true, linearize.Ok}, {false, linearize.Illegal}} {
		res, err := linearize.Check(context.Background(), model, build(c.cleanUp), linearize.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != c.want {
			t.Errorf("with the clean-up release %v: verdict %v, want %v", c.cleanUp, res.Verdict, c.want)
		}
	}
}
