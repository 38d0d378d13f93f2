package propertytest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
)

// electingLock is a MemLock on a backend whose node fault is an election:
// it keeps a dead holder's lease alive on the backend until TTL + extend
// after it (etcd restarts every lease's timer at a new leader), so the
// lock refuses TryLock until then. An extend of forever is a lock that
// never frees a dead holder's lease.
type electingLock struct {
	locks.Locker
	clock  *fakes.Clock
	freeAt *time.Time
}

func (l electingLock) TryLock(ctx context.Context) (locks.Lease, error) {
	if l.clock.Now().Before(*l.freeAt) {
		return nil, locks.ErrLocked
	}
	return l.Locker.TryLock(ctx)
}

// electingBackend is memLock with one Ongoing fault, an election that
// keeps the lock taken until TTL + extend after it, and recovery declared.
func electingBackend(t *testing.T, ttl, extend, recovery time.Duration) *Backend {
	be, err := memLock()(t)
	if err != nil {
		t.Fatal(err)
	}
	clock := be.Clock.(*fakes.Clock)
	freeAt := new(time.Time)
	newLocker := be.NewLocker
	be.NewLocker = func(name string, opts ...locks.Option) (locks.Locker, error) {
		l, err := newLocker(name, opts...)
		return electingLock{Locker: l, clock: clock, freeAt: freeAt}, err
	}
	be.Recovery = recovery
	be.Faults = []Fault{{Name: "kill the leader", Kind: FaultNodeDown, Ongoing: true,
		Inject: func() error { *freeAt = clock.Now().Add(ttl + extend); return nil },
		Heal:   func() error { return nil }}}
	return be
}

// The end nemesis strikes before each deadlock-freedom probe, and each
// probe waits TTL + Slack + Recovery after it: a backend whose elections
// keep a dead holder's lease half a second past its TTL draws the alarm
// with no Recovery and passes with Recovery declared; a lock that never
// frees the lease is still caught with it.
func TestRecoveryBoundsDeadlockFreedom(t *testing.T) {
	const ttl, slack = time.Second, 250 * time.Millisecond
	cases := []struct {
		name             string
		extend, recovery time.Duration
		violated         bool
	}{
		{"election, no recovery declared", 500 * time.Millisecond, 0, true},
		{"election, recovery declared", 500 * time.Millisecond, 500 * time.Millisecond, false},
		{"dead holder's lease never freed, recovery declared", 1000 * time.Hour, 500 * time.Millisecond, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be := electingBackend(t, ttl, c.extend, c.recovery)
			o, err := (Options{Clients: 2, TTL: ttl, Slack: slack, Name: "x",
				Claims: []FaultKind{FaultCrash, FaultPause, FaultNodeDown}}).withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			m, err := newMachine(o, be, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.finish(); err != nil {
				t.Fatal(err)
			}
			var props []Property
			for _, v := range m.findings.found {
				props = append(props, v.Property)
			}
			if got := slices.Contains(props, DeadlockFreedom); got != c.violated {
				t.Fatalf("deadlock freedom violated: %v, want %v: %v\nlog:\n%s", got, c.violated, m.findings.found, strings.Join(m.log, "\n"))
			}
			if len(props) > 1 || (c.violated && m.findings.found[0].Expected) {
				t.Errorf("violations %v: want at most deadlock freedom, claimed", m.findings.found)
			}
			injected := 0
			for _, line := range m.log {
				if strings.HasSuffix(line, "inject kill the leader") {
					injected++
				}
			}
			if want := map[bool]int{true: 3, false: 1}[c.violated]; injected != want || m.faults.active[0] {
				t.Errorf("the nemesis struck %d times (want %d, once per probe), still active %v; log:\n%s",
					injected, want, m.faults.active[0], strings.Join(m.log, "\n"))
			}
		})
	}
}

func TestOngoingFaultNeedsAHeal(t *testing.T) {
	be, err := memLock()(t)
	if err != nil {
		t.Fatal(err)
	}
	be.Faults = []Fault{{Name: "kill", Kind: FaultNodeDown, Ongoing: true, Inject: func() error { return nil }}}
	if err := be.validate(); err == nil || !strings.Contains(err.Error(), "Ongoing without a Heal") {
		t.Errorf("an Ongoing fault without Heal: %v", err)
	}
	be.Faults, be.Recovery = nil, -time.Second
	if err := be.validate(); err == nil {
		t.Error("a negative Recovery passed validation")
	}
}
