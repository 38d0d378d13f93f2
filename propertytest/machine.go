package propertytest

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/lockproof/lockproof/linearize"
	"github.com/lockproof/lockproof/locks"
)

// machine is one run of the state machine: the clients, the scheduler
// that drives their operations, the fault state, the findings and the live
// checks.
type machine struct {
	o   Options
	be  *Backend
	rec *recorder // the lock history, and the register's
	reg register
	log []string

	cl         []*client
	probe      *client // acquires on the suite's behalf for the named checks
	owners     uint64  // the last owner id drawn (newOwner)
	jitterSeed uint64  // the seed of the clients' jitter sources
	fenced     int     // 1: the lock's leases are fenced, -1: they are not, 0: no lease seen yet
	uncertain  int64   // history time of the last event that may have left the lock taken (unknown outcome, crash, foreign call)
	doubted    bool    // such an event happened (uncertain may be 0, the history's start)

	sched *sched
	fatal error // a failure of the harness outside an action's reach (a crashed client's new Locker)

	faults   faultState
	findings findings
	checks   liveChecks // the checks made as the run goes on

	// model is the model the lock history is checked against, recorded
	// once for the run (lockModel); lock is its checker.
	model linearize.Spec
	lock  leaseChecker
}

// faultState is what the run's backend faults did so far.
type faultState struct {
	active    map[int]bool    // indices into Backend.Faults injected and not healed
	used      map[int]bool    // indices injected at least once
	unclaimed map[string]bool // unclaimed faults injected during the run
	faulted   bool            // some backend fault was injected
	events    int             // backend faults injected or healed so far
}

// unclaimedList returns the unclaimed faults, sorted; nil if none.
func (f *faultState) unclaimedList() []string {
	var out []string
	for k := range f.unclaimed {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// findings is what the run's checks found and counted, for its Report.
type findings struct {
	found          []Violation
	ran            map[Property]bool    // the checks this run made
	outcomes       map[string]*Outcomes // per kind of call (outcomeKinds)
	spurious       int                  // refusals of a free lock tolerated (Report.SpuriousRefusals)
	spuriousOwners map[uint64]bool      // the acquisitions they refused
}

func newMachine(o Options, be *Backend, jitterSeed uint64) (*machine, error) {
	m := &machine{o: o, be: be, rec: newRecorder(be.Clock), sched: newSched(o.Settle, be.InProcess),
		faults:   faultState{active: map[int]bool{}, used: map[int]bool{}, unclaimed: map[string]bool{}},
		findings: findings{ran: map[Property]bool{}}}
	m.checks = &liveCheck{m: m}
	m.sched.follow(be.Clock, o.TTL+o.Slack+be.Recovery)
	if c, ok := be.Clock.(ManualClock); ok {
		c.SetDispatch(m.sched.oneByOne)
	}
	var err error
	m.model = lockModel(o)
	if m.lock, err = linearize.Bind[linearize.LeaseInput, linearize.LeaseOutput](m.model); err != nil {
		return nil, fmt.Errorf("propertytest: %w", err)
	}
	m.jitterSeed = jitterSeed
	for i := 0; i <= o.Clients; i++ {
		c := &client{id: i}
		if err := m.newLocker(c, i < o.Clients); err != nil {
			return nil, err
		}
		if i == o.Clients {
			m.probe = c
		} else {
			m.cl = append(m.cl, c)
		}
	}
	if o.Reentrant {
		for i, c := range m.cl {
			for _, d := range m.cl[:i] {
				if c.locker == d.locker {
					return nil, fmt.Errorf("propertytest: Reentrant: clients %d and %d got the same Locker (%T): re-entry is by a Locker's owner, so each client needs one of its own", d.id, c.id, c.locker)
				}
			}
		}
	}
	return m, nil
}

// newLocker gives c a new Locker (and with Options.ReadWrite its readers'
// Locker), as a process starting anew would make: with Options.Reentrant
// and owner set, one of an owner id that no earlier Locker had.
func (m *machine) newLocker(c *client, owner bool) error {
	opts := []locks.Option{locks.WithTTL(m.o.TTL), locks.WithWatchdog(false), locks.WithObserver(crashObserver{}),
		locks.WithRand(rand.NewPCG(m.jitterSeed, uint64(c.id)<<32|uint64(c.gen)))}
	if m.o.Reentrant && owner {
		opts = append(opts, locks.WithOwner(fmt.Sprintf("propertytest-client-%d.%d", c.id, c.gen)))
	}
	c.gen++
	l, err := m.be.NewLocker(m.o.Name, opts...)
	if err != nil {
		return fmt.Errorf("propertytest: new locker for client %d: %w", c.id, err)
	}
	c.locker, c.reader = l, nil
	if m.o.ReadWrite {
		rwl, ok := l.(ReadWriteLocker)
		if !ok {
			return fmt.Errorf("propertytest: ReadWrite: the locker of client %d, a %T, is no ReadWriteLocker", c.id, l)
		}
		c.reader = rwl.RLocker()
	}
	return nil
}

func (m *machine) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf("t=%v ", m.at())+fmt.Sprintf(format, args...))
}

// round rounds a duration for the run's texts (linearize.RoundDuration).
func round(d time.Duration) time.Duration { return linearize.RoundDuration(d) }

// at is the run's time now, as its texts show it.
func (m *machine) at() time.Duration { return round(time.Duration(m.rec.now())) }

// since is t on the run's time, as its texts show it.
func (m *machine) since(t time.Time) time.Duration { return round(t.Sub(m.rec.start)) }

// doubt notes that the lock may have been left taken now (see uncertain).
func (m *machine) doubt() { m.uncertain, m.doubted = m.rec.now(), true }

func (m *machine) newOwner() uint64 { m.owners++; return m.owners }

// valid reports whether h is within its lease's local deadline.
func (m *machine) valid(h *held) bool {
	return h != nil && h.lease.Err() == nil && m.be.Clock.Now().Before(h.lease.Deadline())
}

// held wraps a granted lease with its owner and model token.
func (m *machine) held(lease locks.Lease, owner uint64, out linearize.LeaseOutput) *held {
	_, fenced := lease.Token()
	return &held{lease: lease, owner: owner, token: out.Token, fenced: fenced, proved: m.rec.now()}
}

// drive runs c's new operation until it finishes, stalls or (a Lock)
// blocks, then settles the run and takes in what finished.
func (m *machine) drive(c *client) {
	o := c.op
	m.sched.run(o, o.name == "Lock")
	m.sched.settle()
	m.collect()
}

// now runs c's operation to its end, at once: the suite's own probes, and
// the calls whose result the next step needs.
func (m *machine) now(c *client) {
	o := c.op
	m.sched.resume(o, false)
	m.collect()
}

// collect takes in the operations that finished, retires leases that ran
// out, and checks that a lost lease says so.
func (m *machine) collect() {
	for _, c := range append(m.cl, m.probe) {
		if o := c.op; o != nil {
			if st, ok := m.sched.look(o); ok && st == opFinished {
				fin := c.fin
				c.op, c.fin = nil, nil
				m.sched.forget(o)
				fin()
			}
		}
		m.checks.collected(c)
		if c.cur != nil && !m.valid(c.cur) && !c.unlocking() {
			if c.cur.lease.Err() == nil || errors.Is(c.cur.lease.Err(), locks.ErrLeaseExpired) {
				c.stale = append(c.stale, c.cur)
			}
			c.cur, c.inner = nil, nil // its work, if any, goes on: a holder paused past its lease
		}
	}
	m.checks.stepped()
}

func (m *machine) outputOf(i int) (linearize.LeaseOutput, bool) {
	m.rec.mu.Lock()
	defer m.rec.mu.Unlock()
	return m.rec.lock[i].Output, m.rec.lock[i].Unknown
}

// advance moves the backend's time and lets the clients react.
func (m *machine) advance(d time.Duration) {
	m.sched.holdUp()
	m.be.Advance(d)
	m.sched.settle()
	m.collect()
}

// healLeft heals the faults still active when a run ends before finish
// healed them: rapid ends a run with a panic on a fatal error (an
// action's, a fault that would not inject, the scheduler giving the run
// up) and when it discards the run (a stale fail file whose draws run
// out). A backend that outlives its run, a shared real cluster or a
// user's deployment under a nemesis command, would otherwise keep a
// member cut off, killed or paused into every later run, which then fails
// on the backend, not on the lock. It heals without the scheduler, which
// may be what failed, and logs to logf the heals that fail.
func (m *machine) healLeft(logf func(format string, args ...any)) {
	for _, i := range slices.Sorted(maps.Keys(m.faults.active)) {
		f := m.be.Faults[i]
		delete(m.faults.active, i)
		if err := f.Heal(); err != nil {
			logf("propertytest: healing %s after the run ended early: %v", f.Name, err)
		}
	}
}

// finish ends the run: heals the faults (contending after one marked
// AtAcquire, contendAfter), resolves pending Locks, then
// lets the live checks probe the lock (liveChecks.ended). The faults heal
// in the order of their index, not a map's, which Go draws anew at each
// range: two nodes of five down at the end of a Redlock run came back in
// either order, and two replays of a seed parted there.
func (m *machine) finish() error {
	atAcquire := false
	for _, i := range slices.Sorted(maps.Keys(m.faults.active)) {
		if err := m.toggleFault(i); err != nil {
			return err
		}
		atAcquire = atAcquire || m.be.Faults[i].AtAcquire
	}
	if atAcquire {
		m.contendAfter() // as the Fault action's heal does
	}
	for _, c := range m.cl {
		m.crash(c)
	}
	if m.fatal != nil {
		return m.fatal
	}
	m.sched.settle()
	m.collect()
	m.checks.ended()
	return m.fatal // a fault the end nemesis could not inject or heal
}
