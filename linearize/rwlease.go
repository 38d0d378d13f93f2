package linearize

import (
	"fmt"
	"strings"
	"time"
)

// RWLeaseState is the state of one read-write lease lock in the model
// NewRWLeaseModel returns: the leases held, as a semaphore's permits, and
// whether they are one writer's.
type RWLeaseState struct {
	// SemaphoreState holds the leases held (sorted by owner, each with its
	// earliest expiry), the highest fencing token granted so far across
	// readers and writers, and the Floor.
	SemaphoreState
	// Exclusive reports that Holders is one writer's lease; otherwise
	// every holder is a reader. False when nobody holds the lock.
	Exclusive bool
}

func rwLeaseStateEqual(a, b RWLeaseState) bool {
	return a.Exclusive == b.Exclusive && semaphoreStateEqual(a.SemaphoreState, b.SemaphoreState)
}

func rwLeaseStateHash(s RWLeaseState) uint64 {
	h := semaphoreStateHash(s.SemaphoreState)
	if s.Exclusive {
		h = ^h
	}
	return h
}

// NewRWLeaseModel returns the model of a read-write lease lock with the
// given TTL, partitioned by lock name: any number of readers (Acquire with
// LeaseInput.Shared) or one writer (Acquire without it) hold leases at
// once. With no shared Acquire in the history it accepts exactly the
// histories NewLeaseModel accepts.
//
// Semantics, per lock:
//   - A writer's Acquire is granted only once every lease held (a reader's
//     or a writer's) may have expired or was released; a reader's only
//     once a writer's lease held may have expired or was released, beside
//     any number of readers. Every grant carries a token higher than every
//     token granted before, in either mode: one counter fences readers and
//     writers alike. An owner already holding a lease is granted again
//     only once that lease may have expired, as in NewLeaseModel.
//   - An Acquire, in either mode, is refused only while some lease is held
//     (counting a lease as held until it may have expired). A reader may
//     be refused while only readers hold the lock: a lock that does not
//     starve writers turns new readers away while a writer waits, and the
//     history does not record who waits.
//   - Release and Renew act on the lease of the owner they name, in
//     whatever mode it was granted, as NewSemaphoreModel's do on a permit.
//   - Expiry, tolerance and reported deadlines are NewLeaseModel's, lease by lease: a grant
//     that needs a lease gone relies on its expiry (every one of them, for
//     a writer), and every operation linearized after it must be able to
//     take effect at or after the latest of them.
//
// Unknown outcomes are treated as NewLeaseModel treats them: an unknown
// Acquire may have granted its lease with the lowest token it could have
// had, an unknown Release may have freed its owner's lease, an unknown
// Renew is ignored.
//
// The history is decided by the generic search: bound long histories with
// many unknown outcomes with Options.TimeLimit.
//
// It returns ErrInvalidModel unless ttl > 0 and 0 <= tolerance < ttl.
func NewRWLeaseModel(ttl, tolerance time.Duration) (Model[RWLeaseState, LeaseInput, LeaseOutput], error) {
	if err := leaseTimes("read-write lease", ttl, tolerance); err != nil {
		return Model[RWLeaseState, LeaseInput, LeaseOutput]{}, err
	}
	life := int64(ttl - tolerance)
	return Model[RWLeaseState, LeaseInput, LeaseOutput]{
		Init: func() RWLeaseState { return RWLeaseState{} },
		Step: func(dst []RWLeaseState, s RWLeaseState, op *Operation[LeaseInput, LeaseOutput]) []RWLeaseState {
			return rwLeaseStep(dst, s, op, life)
		},
		Partition: leaseLock,
		// A refused acquire leaves a held lock as it is, and cannot
		// happen on a free one.
		ReadOnly:          refusedAcquire,
		Equal:             rwLeaseStateEqual,
		Hash:              rwLeaseStateHash,
		DescribeOperation: describeLease,
		DescribeState:     describeRWLease,
	}, nil
}

func describeRWLease(s RWLeaseState) string {
	if len(s.Holders) == 0 {
		return fmt.Sprintf("free (last token %d)", s.Token)
	}
	parts := make([]string, len(s.Holders))
	for i, h := range s.Holders {
		parts[i] = fmt.Sprintf("%d (may expire from %d)", h.Owner, h.Expiry)
	}
	mode := "read"
	if s.Exclusive {
		mode = "write"
	}
	return fmt.Sprintf("%s-held by %s; last token %d", mode, strings.Join(parts, ", "), s.Token)
}

// freed returns s without the leases at drop (ascending), which expired;
// ok is false when one of them may not have expired by end.
func (s RWLeaseState) freed(drop []int, end int64) (RWLeaseState, bool) {
	for _, i := range drop {
		if s.Holders[i].Expiry > end {
			return s, false
		}
	}
	n := RWLeaseState{SemaphoreState: s.without(drop, true), Exclusive: s.Exclusive}
	n.Exclusive = n.Exclusive && len(n.Holders) > 0
	return n, true
}

func rwLeaseStep(dst []RWLeaseState, s RWLeaseState, op *Operation[LeaseInput, LeaseOutput], life int64) []RWLeaseState {
	end := op.End()
	if s.Floor > end {
		return dst // an earlier step relied on an expiry after this operation's window
	}
	in := op.Input
	switch in.Op {
	case Acquire:
		token, granted := acquired(op, s.Token)
		if !granted {
			if len(s.Holders) > 0 {
				return append(dst, s)
			}
			return dst
		}
		if token <= s.Token {
			return dst // fencing tokens must increase across grants, in both modes
		}
		ok := true
		if i := s.holder(in.Owner); i >= 0 {
			if s, ok = s.freed([]int{i}, end); !ok {
				return dst
			}
		}
		// The leases in the way: every one for a writer, a writer's for a
		// reader. They must all be able to have expired.
		var drop []int
		if !in.Shared || s.Exclusive {
			for i := range s.Holders {
				drop = append(drop, i)
			}
		}
		if s, ok = s.freed(drop, end); !ok {
			return dst
		}
		s.Token = token
		s.SemaphoreState = s.with(SemaphoreHolder{Owner: in.Owner, Expiry: leaseEnd(op, max(s.Floor, op.Call), life)})
		s.Exclusive = !in.Shared
		return append(dst, s)
	case Release, Renew:
		var buf [2]SemaphoreState
		for _, n := range holderStep(buf[:0], s.SemaphoreState, op, life) {
			dst = append(dst, RWLeaseState{SemaphoreState: n, Exclusive: s.Exclusive && len(n.Holders) > 0})
		}
	}
	return dst
}
