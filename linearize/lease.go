package linearize

import (
	"fmt"
	"math"
	"reflect"
	"time"
)

// LeaseOp is the kind of a lease-lock operation.
type LeaseOp uint8

const (
	// Acquire asks for the lock for Owner (a TryLock, or the final attempt
	// of a Lock): granted with a fencing token, or refused because the lock
	// is held.
	Acquire LeaseOp = iota + 1
	// Release gives the lock up; it succeeds only for the current holder.
	Release
	// Renew extends the holder's lease by a full TTL; it succeeds only for
	// the current holder.
	Renew
)

var leaseOpNames = [...]string{Acquire: "acquire", Release: "release", Renew: "renew"}

// String returns "acquire", "release" or "renew".
func (o LeaseOp) String() string {
	if o >= Acquire && o <= Renew {
		return leaseOpNames[o]
	}
	return fmt.Sprintf("LeaseOp(%d)", uint8(o))
}

// MarshalText encodes the op as its name.
func (o LeaseOp) MarshalText() ([]byte, error) {
	if o < Acquire || o > Renew {
		return nil, fmt.Errorf("linearize: invalid lease op %d", uint8(o))
	}
	return []byte(leaseOpNames[o]), nil
}

// UnmarshalText decodes "acquire", "release" or "renew".
func (o *LeaseOp) UnmarshalText(b []byte) error {
	for i := Acquire; i <= Renew; i++ {
		if string(b) == leaseOpNames[i] {
			*o = i
			return nil
		}
	}
	return fmt.Errorf("linearize: unknown lease op %q (want acquire, release or renew)", b)
}

// LeaseInput is a call on a named lease lock.
type LeaseInput struct {
	// Lock is the lock's name: the partition key.
	Lock string `json:"lock"`
	// Op is what was asked.
	Op LeaseOp `json:"op"`
	// Owner is the acquisition's owner value (random per acquisition, as in
	// lockproof's locks); Release and Renew name the owner they act for.
	Owner uint64 `json:"owner"`
	// Shared marks an Acquire in shared (read) mode for NewRWLeaseModel;
	// false is exclusive (write) mode, the only one of the other lease
	// models. Release and Renew ignore it: the owner names the lease. Left
	// out of the JSON when false.
	Shared bool `json:"shared,omitempty"`
}

// LeaseOutput is what a lease-lock call returned.
type LeaseOutput struct {
	// OK: the acquire was granted, the release or renew succeeded. False:
	// the acquire was refused because the lock was held, the release or
	// renew failed with "not held".
	OK bool `json:"ok"`
	// Token is the fencing token of a granted acquire (locks.Token);
	// ignored otherwise.
	Token uint64 `json:"token"`
	// Deadline is the instant, on the history's clock, until which a
	// granted acquire told its holder the lease runs (0: none reported);
	// the lease may expire from then even if its TTL ends later. Ignored
	// for other operations: a renewal extends by the TTL from its call.
	Deadline int64 `json:"deadline,omitempty"`
}

// leaseEnd is the earliest instant at which the lease op grants, starting
// no earlier than start, may expire: life after start, or the deadline the
// lock reported to its holder when that comes first.
func leaseEnd(op *Operation[LeaseInput, LeaseOutput], start, life int64) int64 {
	end := satAdd(start, life)
	if d := op.Output.Deadline; d != 0 && op.Input.Op == Acquire && !op.Unknown && op.Output.OK {
		end = min(end, d)
	}
	return end
}

// LeaseState is the state of one lease lock in LeaseModel.
type LeaseState struct {
	// Held reports whether Holder holds the lock (its lease may still have
	// expired since: see Expiry).
	Held bool
	// Holder is the owner holding the lock, when Held.
	Holder uint64
	// Token is the highest fencing token granted so far; zero before any.
	Token uint64
	// Expiry is the earliest instant at which the holder's lease may have
	// expired: the grant's (or last renewal's) earliest possible time plus
	// TTL minus the tolerance.
	Expiry int64
	// Floor is the latest expiry the linearization so far relied on: every
	// later operation took effect at or after it.
	Floor int64
}

// NewLeaseModel returns the model of a lease lock with the given TTL,
// partitioned by lock name. Times in the history are read as nanoseconds.
//
// Semantics, per lock:
//   - Acquire by o is granted only if the lock is free or the holder's lease
//     may have expired, and only with a token higher than every token granted
//     before (fencing tokens order grants); o then holds it. It is refused
//     only while the lock is held (by anyone).
//   - Release and Renew by the holder succeed (the release frees the lock,
//     the renewal extends the lease). Release and Renew by anyone else must
//     fail and change nothing: a foreign release that succeeds is Illegal.
//     The holder's own Release or Renew may fail only once its lease may
//     have expired, and the lock is then free.
//   - Expiry: a lease granted or renewed by an operation called at time c
//     started no earlier than c (or than the Floor), so it may expire from
//     c + ttl - tolerance on. An operation that relies on the expiry (a
//     grant to another owner, the holder's failed release or renew) must
//     have been able to take effect at that instant: its return time (no
//     bound for an unknown outcome) is at or after it, and so are the
//     return times of every operation linearized after it. Until then the
//     lease holds, so a second grant before it is a double grant, Illegal.
//     Expiry is allowed, never forced: a lock still held after its TTL is a
//     liveness question this model does not ask.
//   - Reported deadlines: a grant whose output carries the Deadline its
//     holder was given may expire from that deadline on, when it comes
//     before the TTL reckoning. The holder acts only until then,
//     so a lock that reckons its lease from the call, from a session made
//     at the call or from a quorum's first yes is judged by its own
//     promise. A deadline later than the reckoning changes nothing here:
//     whether the backend honours it is for a check that knows when the
//     holder acted.
//   - tolerance absorbs the clock error between the recorded times and the
//     server's TTL clock (rate drift over one TTL plus any offset between the
//     clocks that stamped the history). With one monotonic clock for the
//     whole history and a server that never expires early, zero is exact.
//
// Unknown outcomes: an unknown Acquire, if it took effect, granted the lock
// to its owner with a token the history never saw; the model assumes the
// lowest possible one (previous + 1), which constrains later grants the
// least. An unknown Release may have freed the lock. An unknown Renew is
// ignored: extending a lease only forbids things, so leaving it out is
// always at least as permissive.
//
// Check decides a history of this model with a procedure of its own (see
// the package documentation): violations visible without search first,
// then the search of the model, capped, then a search on sets of states
// for the locks it left undecided. That holds while the model's Step is
// the one returned here; a caller who replaces Step gets the generic
// search of the new Step.
//
// It returns ErrInvalidModel unless ttl > 0 and 0 <= tolerance < ttl.
func NewLeaseModel(ttl, tolerance time.Duration) (Model[LeaseState, LeaseInput, LeaseOutput], error) {
	m, err := newLeaseModel("lease", ttl, tolerance, false)
	if err != nil {
		return m, err
	}
	m.fast = newLeaseDecider(int64(ttl-tolerance), m).decide
	m.fastStep = reflect.ValueOf(m.Step).Pointer()
	return m, nil
}

// NewLeaseFromCallModel returns the model of a lease lock whose lease runs
// from its operation's call: NewLeaseModel's, but a lease granted or
// renewed by an operation called at c may expire from c + ttl - tolerance
// on, even when the operation took effect later, after an earlier lease's
// expiry.
//
// NewLeaseModel reckons a grant that relied on an earlier lease's expiry
// from that expiry: one key, set with its TTL after the old one ran out.
// Two kinds of lock fix a lease's end at the call instead. A quorum of
// independent nodes (Redlock): the grant takes effect at the last yes it
// needs, but a node that was free said yes at once, and its copy runs out
// a TTL after that. A lock that writes an expiry the client computed
// before asking (a SETNX lock with the expiry in its value): a takeover
// that lands after the old lease ran out still writes the call's expiry.
// A slow grant of either kind, followed by another grant a TTL after its
// call, is a double grant to NewLeaseModel and none in fact: the client
// reckons its lease from its call too.
//
// Checks take the generic search: the lease decider knows NewLeaseModel
// alone. It returns ErrInvalidModel unless ttl > 0 and 0 <= tolerance < ttl.
func NewLeaseFromCallModel(ttl, tolerance time.Duration) (Model[LeaseState, LeaseInput, LeaseOutput], error) {
	return newLeaseModel("lease from call", ttl, tolerance, true)
}

// newLeaseModel is the lease model named model; fromCall reckons every
// lease from its operation's call alone (NewLeaseFromCallModel).
func newLeaseModel(model string, ttl, tolerance time.Duration, fromCall bool) (Model[LeaseState, LeaseInput, LeaseOutput], error) {
	if err := leaseTimes(model, ttl, tolerance); err != nil {
		return Model[LeaseState, LeaseInput, LeaseOutput]{}, err
	}
	life := int64(ttl - tolerance)
	m := Model[LeaseState, LeaseInput, LeaseOutput]{
		Init: func() LeaseState { return LeaseState{} },
		Step: func(dst []LeaseState, s LeaseState, op *Operation[LeaseInput, LeaseOutput]) []LeaseState {
			return leaseStep(dst, s, op, life, fromCall)
		},
		Partition: leaseLock,
		// A refused acquire leaves a held lock as it is, and cannot
		// happen on a free one.
		ReadOnly:          refusedAcquire,
		Equal:             func(a, b LeaseState) bool { return a == b },
		Hash:              leaseStateHash,
		DescribeOperation: describeLease,
		DescribeState: func(s LeaseState) string {
			if !s.Held {
				return fmt.Sprintf("free (last token %d)", s.Token)
			}
			return fmt.Sprintf("held by %d token %d (may expire from %d)", s.Holder, s.Token, s.Expiry)
		},
	}
	return m, nil
}

// leaseTimes validates a lease model's TTL and tolerance; model names it.
func leaseTimes(model string, ttl, tolerance time.Duration) error {
	if ttl <= 0 || tolerance < 0 || tolerance >= ttl {
		return fmt.Errorf("%w: %s model needs ttl > 0 and 0 <= tolerance < ttl, got ttl %v, tolerance %v",
			ErrInvalidModel, model, ttl, tolerance)
	}
	return nil
}

// leaseLock is the partition of the lease models: the lock's name.
func leaseLock(in LeaseInput) string { return in.Lock }

// refusedAcquire is the lease models' ReadOnly: a refused acquire (known
// outcome) changes no state.
func refusedAcquire(op *Operation[LeaseInput, LeaseOutput]) bool {
	return op.Input.Op == Acquire && !op.Output.OK && !op.Unknown
}

func leaseStep(dst []LeaseState, s LeaseState, op *Operation[LeaseInput, LeaseOutput], life int64, fromCall bool) []LeaseState {
	end := op.End()
	if s.Floor > end {
		return dst // an earlier step relied on an expiry after this operation's window
	}
	in, out := op.Input, op.Output
	// expired is s once the holder's lease ran out, when that can fall in
	// this operation's window.
	expirable := s.Held && s.Expiry <= end
	expired := s
	if expirable {
		expired.Held, expired.Holder, expired.Floor = false, 0, max(s.Floor, s.Expiry)
	}
	// start is the earliest instant the lease this operation grants or
	// renews can run from: its call, and, on one key, no earlier than the
	// expiry the linearization relied on.
	start := func(floor int64) int64 {
		if fromCall {
			return op.Call
		}
		return max(floor, op.Call)
	}
	grant := func(from LeaseState, token uint64) LeaseState {
		return LeaseState{
			Held: true, Holder: in.Owner, Token: token,
			Expiry: leaseEnd(op, start(from.Floor), life), Floor: from.Floor,
		}
	}
	switch in.Op {
	case Acquire:
		token, granted := acquired(op, s.Token)
		if !granted {
			if s.Held {
				return append(dst, s)
			}
			return dst
		}
		if token <= s.Token {
			return dst // fencing tokens must increase across grants
		}
		switch {
		case !s.Held:
			return append(dst, grant(s, token))
		case expirable:
			return append(dst, grant(expired, token))
		}
		return dst
	case Release, Renew:
		mine := s.Held && s.Holder == in.Owner
		if op.Unknown {
			if in.Op == Release && mine {
				s.Held, s.Holder = false, 0
				return append(dst, s)
			}
			return dst
		}
		if out.OK {
			if !mine {
				return dst
			}
			if in.Op == Release {
				s.Held, s.Holder = false, 0
			} else {
				s.Expiry = max(s.Expiry, satAdd(start(s.Floor), life))
			}
			return append(dst, s)
		}
		if !mine {
			return append(dst, s) // not held by this owner: a refusal changes nothing
		}
		if expirable {
			return append(dst, expired)
		}
		return dst
	}
	return dst
}

// acquired reads an Acquire: granted with token, or (a known outcome) refused.
// An unknown one is taken as granted with the lowest token it could have
// had, last + 1, which constrains later grants the least.
func acquired(op *Operation[LeaseInput, LeaseOutput], last uint64) (token uint64, granted bool) {
	if op.Unknown {
		return last + 1, true
	}
	return op.Output.Token, op.Output.OK
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

func describeLease(op *Operation[LeaseInput, LeaseOutput]) string {
	in, out := op.Input, op.Output
	name := in.Op.String()
	if in.Shared && in.Op == Acquire {
		name = "acquire shared"
	}
	call := fmt.Sprintf("%s(%s, owner %d)", name, in.Lock, in.Owner)
	switch {
	case op.Unknown:
		return call + " -> ?"
	case in.Op == Acquire && out.OK && out.Deadline != 0:
		return fmt.Sprintf("%s -> granted, token %d, until %s", call, out.Token, nsText(out.Deadline))
	case in.Op == Acquire && out.OK:
		return fmt.Sprintf("%s -> granted, token %d", call, out.Token)
	case in.Op == Acquire:
		return call + " -> locked"
	case out.OK:
		return call + " -> ok"
	}
	return call + " -> not held"
}
