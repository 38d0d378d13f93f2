package propertytest

import (
	"context"
	"runtime"

	"github.com/lockproof/lockproof/locks"
)

// crashKey marks the context of a TryLock that CrashInTryLock stops.
type crashKey struct{}

// crashObserver is the Observer the suite gives every Locker. At
// locks.PointAcquired, within a TryLock whose context carries crashKey, it
// ends the goroutine (runtime.Goexit): the client dies there, after the
// backend granted and before TryLock returned, and nothing the lock would
// do after that point happens. At every other point it reported, the
// operation passes its gate (see sched.go): a point is a place where the
// scheduler may stall the client, a pause before a renewal for instance.
type crashObserver struct{}

// pointGate begins the name of the gate passage at a point the lock
// reported, "point acquired" for instance; requests are named by fakes.
const pointGate = "point "

func (crashObserver) Observe(ctx context.Context, e locks.Event) {
	if e.Point == locks.PointGrantedTooLate {
		// Not a gate: the history notes the grant the lock gives back
		// (see synthSlot.late), and the run goes on as it would have.
		if s, ok := ctx.Value(synthKey{}).(*synthSlot); ok {
			s.gaveBack(e)
		}
		return
	}
	if e.Point == locks.PointAcquired { // drawn whether or not the lease turns out fenced
		if s, ok := ctx.Value(synthKey{}).(*synthSlot); ok {
			if s.token == 0 {
				s.token = s.next()
			}
			s.acquired, s.fence, s.fenced = true, e.Token, e.Fenced
		}
	}
	if e.Point == locks.PointAcquired && ctx.Value(crashKey{}) != nil {
		runtime.Goexit()
	}
	locks.GateRequest(ctx, pointGate+e.Point.String())()
}

// synthKey marks the context of an acquisition: its synthSlot.
type synthKey struct{}

// synthSlot holds the synthetic token of an acquisition without fencing,
// drawn when the lock reports locks.PointAcquired (the backend granted),
// so that grants are numbered in the order they were made even when one
// stalls before it returns. A lock that reports no PointAcquired gets its
// number when the call returns.
type synthSlot struct {
	token uint64
	next  func() uint64

	// What the lock reported at PointAcquired: the backend granted, with
	// this token. A client that dies there did hold the lock.
	acquired bool
	fence    locks.Token
	fenced   bool

	// late are the grants the lock reported at PointGrantedTooLate and
	// gave back: each held the lock for a while within this call, which
	// the history must show beside the call's own outcome, or another
	// client's refusal then, and the lower token of a grant after it,
	// read as violations (a waiting Lock that returns a later grant).
	now  func() int64
	late []lateGrant
}

// lateGrant is one grant given back: when the lock reported it, history
// time, and its fencing token (0 without one).
type lateGrant struct {
	at    int64
	token uint64
}

// gaveBack notes a grant given back. Without a fencing token it gets no
// synthetic one: those number grants in the order the lock reported them,
// and this grant was made at some moment before its report, which may
// come after other clients' grants (Redlock's majority won at the start
// of an attempt held up past its validity).
func (s *synthSlot) gaveBack(e locks.Event) {
	g := lateGrant{at: s.now()}
	if e.Fenced {
		g.token = uint64(e.Token)
	}
	s.late = append(s.late, g)
}

func (s *synthSlot) take() uint64 {
	if s.token == 0 {
		s.token = s.next()
	}
	return s.token
}
