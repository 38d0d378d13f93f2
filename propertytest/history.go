package propertytest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockproof/lockproof/linearize"
	"github.com/lockproof/lockproof/locks"
)

type (
	lockOp = linearize.Operation[linearize.LeaseInput, linearize.LeaseOutput]
	regOp  = linearize.Operation[linearize.FencedInput[int], linearize.FencedOutput[int]]
)

// recorder keeps the lock and register histories of one run, stamped with
// the backend's clock as nanoseconds since the run began. Safe for
// concurrent use: blocked Locks return on their own goroutines.
type recorder struct {
	clock locks.Clock
	start time.Time

	mu       sync.Mutex
	lock     []lockOp
	reg      []regOp
	unfenced int // register operations made without a fencing token
	grants   uint64
}

func newRecorder(c locks.Clock) *recorder { return &recorder{clock: c, start: c.Now()} }

// now is the clock reading as history time.
func (r *recorder) now() int64 { return int64(r.clock.Now().Sub(r.start)) }

// deadline is a lease's deadline as history time: 0 (none reported) for
// the zero time, at least 1 for one at or before the run's start.
func (r *recorder) deadline(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(int64(t.Sub(r.start)), 1)
}

// call records the call of a lock operation and returns its index.
func (r *recorder) call(client int, op linearize.LeaseOp, lockName string, owner uint64) int {
	t := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lock = append(r.lock, lockOp{
		ID: len(r.lock), ClientID: client, Call: t, Return: t,
		Input: linearize.LeaseInput{Lock: lockName, Op: op, Owner: owner},
	})
	return len(r.lock) - 1
}

// shared marks lock operation i, an acquire, as one in shared mode.
func (r *recorder) shared(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lock[i].Input.Shared = true
}

// ret records the return of lock operation i.
func (r *recorder) ret(i int, out linearize.LeaseOutput, unknown bool) {
	t := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	op := &r.lock[i]
	op.Return, op.Output, op.Unknown = max(t, op.Call), out, unknown
}

// cleanedUp records, after the crashed acquire i, a release by its owner
// of unknown outcome called when the acquire was. A lock's own clean-up of
// an abandoned attempt may run before the cancelled call returns, which no
// real crash does; the owner fenced nothing, so such a release changes no
// property, and without it a later grant would read as a double grant.
func (r *recorder) cleanedUp(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	acq := r.lock[i]
	r.unknownBesideLocked(acq, linearize.Release, acq.Input.Owner, false, acq.Call)
}

// crashedHolder records, at the crash of a client holding owner's lease
// whose Locker is a Crasher, a release by owner of unknown outcome: the
// lease may end with its connections or live out its TTL. The dead client
// does not act, so no check needs more. A non-Crasher's lease is held to
// its TTL.
func (r *recorder) crashedHolder(client int, lockName string, owner uint64) {
	t := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lock = append(r.lock, lockOp{
		ID: len(r.lock), ClientID: client, Call: t, Return: t, Unknown: true,
		Input: linearize.LeaseInput{Lock: lockName, Op: linearize.Release, Owner: owner},
	})
}

// unknownBesideLocked appends, beside acquire acq, an operation of unknown
// outcome by acq's client on acq's lock: op for owner (an acquire shared
// or not), called at call and returning when acq did (or at call, if
// later). Called with r.mu held.
func (r *recorder) unknownBesideLocked(acq lockOp, op linearize.LeaseOp, owner uint64, shared bool, call int64) {
	r.lock = append(r.lock, lockOp{
		ID: len(r.lock), ClientID: acq.ClientID, Call: call, Return: max(acq.Return, call), Unknown: true,
		Input: linearize.LeaseInput{Lock: acq.Input.Lock, Op: op, Owner: owner, Shared: shared},
	})
}

// gaveBack records a grant the lock made within acquire i and gave back
// (locks.PointGrantedTooLate), under an owner of its own: an acquire
// called when i was, granted with g's token when reported (unknown
// outcome without fencing tokens), and a release of unknown outcome from
// then until i returned.
func (r *recorder) gaveBack(i int, owner uint64, g lateGrant) {
	r.mu.Lock()
	defer r.mu.Unlock()
	acq := r.lock[i]
	in := linearize.LeaseInput{Lock: acq.Input.Lock, Op: linearize.Acquire, Owner: owner, Shared: acq.Input.Shared}
	at := max(g.at, acq.Call)
	grant := lockOp{ID: len(r.lock), ClientID: acq.ClientID, Call: acq.Call, Return: at, Input: in,
		Output: linearize.LeaseOutput{OK: true, Token: g.token}}
	if g.token == 0 {
		grant.Output, grant.Unknown = linearize.LeaseOutput{}, true
	}
	r.lock = append(r.lock, grant)
	r.unknownBesideLocked(acq, linearize.Release, owner, false, at)
}

// heldUp records, beside acquire i, which stood stalled after a request
// while time moved, an acquire of unknown outcome under an owner of its
// own over the same span: a grant i's request made and lost unseen (a
// claim written, expired and taken before mysqllock's read-back). It
// explains other clients' refusals and lower tokens, never a second
// holder.
func (r *recorder) heldUp(i int, owner uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	acq := r.lock[i]
	r.unknownBesideLocked(acq, linearize.Acquire, owner, acq.Input.Shared, acq.Call)
}

// releaseHeldUp makes release i, stalled after a request while time moved
// and then refused (not held), of unknown outcome: a multi-node release
// (Redlock) may have freed the lock on one node before the stall, and its
// later requests then find the key expired or another's. Without time
// moving a refusal stays a refusal: no key expires meanwhile.
func (r *recorder) releaseHeldUp(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op := &r.lock[i]
	if op.Input.Op == linearize.Release && !op.Output.OK && !op.Unknown {
		op.Unknown = true
	}
}

// syntheticGap spaces the synthetic tokens, leaving room for the lease
// model's unknown acquires (previous token + 1) between two grants.
const syntheticGap = 1 << 16

// syntheticToken numbers a grant of a lock without fencing tokens, in the
// order the grants returned, so that the lease model can order them: the
// n-th is n × syntheticGap.
func (r *recorder) syntheticToken() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.grants++
	return r.grants * syntheticGap
}

// register records one register operation, which the register itself has
// already applied at the current time.
func (r *recorder) register(client int, in linearize.FencedInput[int], out linearize.FencedOutput[int], fenced bool) {
	t := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !fenced {
		r.unfenced++
	}
	r.reg = append(r.reg, regOp{ID: len(r.reg), ClientID: client, Call: t, Return: t, Input: in, Output: out})
}

// histories returns copies of both histories.
func (r *recorder) histories() ([]lockOp, []regOp, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]lockOp(nil), r.lock...), append([]regOp(nil), r.reg...), r.unfenced
}

// acquireOutcome turns what TryLock or Lock returned into the lease
// model's output. Only a grant and a refusal (ErrLocked) are known
// outcomes: any other error (a timeout, a lost reply, a cancelled wait, a
// grant that expired before it was handed over) may hide a grant.
func acquireOutcome(lease locks.Lease, err error, synth func() uint64) (linearize.LeaseOutput, bool) {
	switch {
	case err == nil && lease != nil:
		tok, fenced := lease.Token()
		if !fenced {
			return linearize.LeaseOutput{OK: true, Token: synth()}, false
		}
		return linearize.LeaseOutput{OK: true, Token: uint64(tok)}, false
	case errors.Is(err, locks.ErrLocked):
		return linearize.LeaseOutput{}, false
	}
	return linearize.LeaseOutput{}, true
}

// releaseOutcome turns what Unlock or Renew returned into the model's
// output: nil succeeded, ErrNotHeld is a refusal, anything else unknown
// (ErrLeaseExpired hides the answer to the release still sent; an unknown
// release by a non-holder changes nothing in the model).
func releaseOutcome(err error) (linearize.LeaseOutput, bool) {
	switch {
	case err == nil:
		return linearize.LeaseOutput{OK: true}, false
	case errors.Is(err, locks.ErrNotHeld) && !errors.Is(err, locks.ErrLeaseExpired):
		return linearize.LeaseOutput{}, false
	}
	return linearize.LeaseOutput{}, true
}

// register is the shared resource every holder updates with a
// read-modify-write: a counter guarded by fencing tokens as locks.Fence
// (leases without a token bypass the guard). It notes every lost update: an
// admitted write of v+1 when the value is no longer v.
type register struct {
	mu      sync.Mutex
	value   int
	highest uint64
	seen    bool
	late    []bool // per admitted write: made after its lease's deadline
	lost    []lostUpdate
}

// lostUpdate is one admitted write that overwrote an update it never read.
type lostUpdate struct {
	client     int
	token      uint64
	fenced     bool
	read, over int   // the value it read, the value it overwrote
	at         int64 // history time of the write
	late       bool  // this write, or one it overwrote, came after its lease's deadline
}

func (l lostUpdate) String() string {
	tok := "no fencing token"
	if l.fenced {
		tok = fmt.Sprintf("token %d", l.token)
	}
	late := ""
	if l.late {
		late = ", a holder having written after its lease's deadline (paused)"
	}
	return fmt.Sprintf("client %d (%s) read %d and wrote %d over %d at t=%v%s: %s lost",
		l.client, tok, l.read, l.read+1, l.over, time.Duration(l.at), late, plural(l.over-l.read, "update", "updates"))
}

// admitLocked applies the fencing rule of locks.Fence.
func (g *register) admitLocked(tok uint64, fenced bool) bool {
	if !fenced {
		return true
	}
	if g.seen && tok < g.highest {
		return false
	}
	g.highest, g.seen = tok, true
	return true
}

// read returns the value and the number of writes admitted so far.
func (g *register) read(tok uint64, fenced bool) (v, writes int, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.admitLocked(tok, fenced) {
		return 0, 0, false
	}
	return g.value, len(g.late), true
}

// write stores read+1 if admitted, noting a lost update when the value is
// no longer read; writes is what read returned with it. lu.late says
// whether this write is late; the update is blamed on a pause if it, or
// any write it overwrote, is late.
func (g *register) write(tok uint64, fenced bool, read, writes int, lu lostUpdate) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.admitLocked(tok, fenced) {
		return false
	}
	own := lu.late
	if g.value != read {
		for _, l := range g.late[writes:] {
			lu.late = lu.late || l
		}
		lu.read, lu.over = read, g.value
		g.lost = append(g.lost, lu)
	}
	g.late = append(g.late, own)
	g.value = read + 1
	return true
}

func (g *register) lostUpdates() []lostUpdate {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]lostUpdate(nil), g.lost...)
}
