package linearize

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"time"
)

// SemaphoreHolder is one permit held in a SemaphoreState.
type SemaphoreHolder struct {
	// Owner is the acquisition holding the permit.
	Owner uint64
	// Expiry is the earliest instant at which the permit's lease may have
	// expired, as LeaseState.Expiry.
	Expiry int64
}

// SemaphoreState is the state of one counting semaphore in the model
// NewSemaphoreModel returns.
type SemaphoreState struct {
	// Holders are the permits held, sorted by owner; at most the model's
	// number of permits. A holder's lease may have expired since (see
	// Expiry): expiry is allowed, never forced.
	Holders []SemaphoreHolder
	// Token is the highest fencing token granted so far; zero before any.
	Token uint64
	// Floor is the latest expiry the linearization so far relied on, as
	// LeaseState.Floor.
	Floor int64
}

// holder returns the index of owner's permit in s.Holders, or -1.
func (s SemaphoreState) holder(owner uint64) int {
	i, ok := slices.BinarySearchFunc(s.Holders, owner, func(h SemaphoreHolder, o uint64) int {
		switch {
		case h.Owner < o:
			return -1
		case h.Owner > o:
			return 1
		}
		return 0
	})
	if !ok {
		return -1
	}
	return i
}

// without returns s with the permits at the indices in drop (ascending)
// removed, Floor raised to their latest expiry when expired is set.
func (s SemaphoreState) without(drop []int, expired bool) SemaphoreState {
	out := SemaphoreState{Token: s.Token, Floor: s.Floor,
		Holders: make([]SemaphoreHolder, 0, len(s.Holders)-len(drop)+1)}
	j := 0
	for i, h := range s.Holders {
		if j < len(drop) && drop[j] == i {
			j++
			if expired {
				out.Floor = max(out.Floor, h.Expiry)
			}
			continue
		}
		out.Holders = append(out.Holders, h)
	}
	return out
}

// with returns s with a permit for h added, in owner order.
func (s SemaphoreState) with(h SemaphoreHolder) SemaphoreState {
	i, _ := slices.BinarySearchFunc(s.Holders, h.Owner, func(x SemaphoreHolder, o uint64) int {
		if x.Owner < o {
			return -1
		}
		if x.Owner > o {
			return 1
		}
		return 0
	})
	s.Holders = slices.Insert(slices.Clip(s.Holders), i, h)
	return s
}

// renewed returns s with the lease at i extended by a renewal called at
// call: it may expire from call (or the Floor) plus life on.
func (s SemaphoreState) renewed(i int, call, life int64) SemaphoreState {
	n := s
	n.Holders = slices.Clone(s.Holders)
	n.Holders[i].Expiry = max(n.Holders[i].Expiry, satAdd(max(s.Floor, call), life))
	return n
}

var semaphoreSeed = maphash.MakeSeed()

func semaphoreStateHash(s SemaphoreState) uint64 {
	var h maphash.Hash
	h.SetSeed(semaphoreSeed)
	var b [8]byte
	put := func(v uint64) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		_, _ = h.Write(b[:])
	}
	put(s.Token)
	put(uint64(s.Floor))
	for _, x := range s.Holders {
		put(x.Owner)
		put(uint64(x.Expiry))
	}
	return h.Sum64()
}

func semaphoreStateEqual(a, b SemaphoreState) bool {
	return a.Token == b.Token && a.Floor == b.Floor && slices.Equal(a.Holders, b.Holders)
}

// NewSemaphoreModel returns the model of a counting semaphore of permits
// permits, each a lease with the given TTL, partitioned by lock name. It
// generalises NewLeaseModel from one holder to at most permits holders,
// and with permits = 1 accepts exactly the histories NewLeaseModel
// accepts. Operations are LeaseInput and LeaseOutput: an Acquire asks for
// one permit, Release and Renew act on the permit of the owner they name.
//
// Semantics, per semaphore:
//   - Acquire by o is granted only while fewer than permits leases are
//     held, counting a lease as held until it may have expired, and only
//     with a token higher than every token granted before (fencing tokens
//     order grants across all permits); o then holds a permit. It is
//     refused only while permits leases are held.
//   - Release and Renew by a holder succeed (the release frees its permit,
//     the renewal extends its lease); by anyone else they must fail and
//     change nothing. A holder's own Release or Renew may fail only once
//     its lease may have expired, and its permit is then free.
//   - Expiry, tolerance and reported deadlines are NewLeaseModel's, permit by permit: a grant
//     that needs the permit of a lease that may have expired relies on
//     that expiry, and every operation linearized after it must be able to
//     take effect at or after it. When several leases may have expired, the
//     model tries each choice of the ones to free.
//
// Unknown outcomes are treated as NewLeaseModel treats them: an unknown
// Acquire may have granted a permit with the lowest token it could have
// had, an unknown Release may have freed its owner's permit, an unknown
// Renew is ignored.
//
// The history is decided by the generic search (NewLeaseModel's own
// decider knows one holder only), so long histories with many unknown
// outcomes may take the search long: bound it with Options.TimeLimit.
//
// It returns ErrInvalidModel unless permits >= 1, ttl > 0 and
// 0 <= tolerance < ttl.
func NewSemaphoreModel(permits int, ttl, tolerance time.Duration) (Model[SemaphoreState, LeaseInput, LeaseOutput], error) {
	if permits < 1 || ttl <= 0 || tolerance < 0 || tolerance >= ttl {
		return Model[SemaphoreState, LeaseInput, LeaseOutput]{}, fmt.Errorf(
			"%w: semaphore model needs permits >= 1, ttl > 0 and 0 <= tolerance < ttl, got permits %d, ttl %v, tolerance %v",
			ErrInvalidModel, permits, ttl, tolerance)
	}
	life := int64(ttl - tolerance)
	return Model[SemaphoreState, LeaseInput, LeaseOutput]{
		Init: func() SemaphoreState { return SemaphoreState{} },
		Step: func(dst []SemaphoreState, s SemaphoreState, op *Operation[LeaseInput, LeaseOutput]) []SemaphoreState {
			return semaphoreStep(dst, s, op, permits, life)
		},
		Partition: leaseLock,
		// A refused acquire leaves a full semaphore as it is, and cannot
		// happen on one with a permit free.
		ReadOnly:          refusedAcquire,
		Equal:             semaphoreStateEqual,
		Hash:              semaphoreStateHash,
		DescribeOperation: describeLease,
		DescribeState: func(s SemaphoreState) string {
			if len(s.Holders) == 0 {
				return fmt.Sprintf("no permit held (last token %d)", s.Token)
			}
			parts := make([]string, len(s.Holders))
			for i, h := range s.Holders {
				parts[i] = fmt.Sprintf("%d (may expire from %d)", h.Owner, h.Expiry)
			}
			return fmt.Sprintf("%d of %d permits held by %s; last token %d", len(s.Holders), permits, strings.Join(parts, ", "), s.Token)
		},
	}, nil
}

func semaphoreStep(dst []SemaphoreState, s SemaphoreState, op *Operation[LeaseInput, LeaseOutput], permits int, life int64) []SemaphoreState {
	end := op.End()
	if s.Floor > end {
		return dst // an earlier step relied on an expiry after this operation's window
	}
	in := op.Input
	switch in.Op {
	case Acquire:
		token, granted := acquired(op, s.Token)
		if !granted {
			if len(s.Holders) >= permits {
				return append(dst, s)
			}
			return dst
		}
		if token <= s.Token {
			return dst // fencing tokens must increase across grants
		}
		if i := s.holder(in.Owner); i >= 0 {
			// The owner holds a permit already: granted again only once
			// that lease may have expired, as NewLeaseModel has it.
			if s.Holders[i].Expiry > end {
				return dst
			}
			s = s.without([]int{i}, true)
		}
		grant := func(from SemaphoreState) SemaphoreState {
			from.Token = token
			return from.with(SemaphoreHolder{Owner: in.Owner, Expiry: leaseEnd(op, max(from.Floor, op.Call), life)})
		}
		if len(s.Holders) < permits {
			return append(dst, grant(s))
		}
		// Full: free len-permits+1 leases that may have expired by end,
		// each choice of them a state of its own.
		var expirable []int
		for i, h := range s.Holders {
			if h.Expiry <= end {
				expirable = append(expirable, i)
			}
		}
		need := len(s.Holders) - permits + 1
		if len(expirable) < need {
			return dst
		}
		pick := make([]int, need)
		var choose func(from, k int)
		choose = func(from, k int) {
			if k == need {
				dst = append(dst, grant(s.without(pick, true)))
				return
			}
			for i := from; i <= len(expirable)-(need-k); i++ {
				pick[k] = expirable[i]
				choose(i+1, k+1)
			}
		}
		choose(0, 0)
		return dst
	case Release, Renew:
		return holderStep(dst, s, op, life)
	}
	return dst
}

// holderStep is the step of a Release or Renew on the lease of the owner
// it names among s's holders, whatever the lock's kind.
func holderStep(dst []SemaphoreState, s SemaphoreState, op *Operation[LeaseInput, LeaseOutput], life int64) []SemaphoreState {
	in, out := op.Input, op.Output
	i := s.holder(in.Owner)
	mine := i >= 0
	if op.Unknown {
		if in.Op == Release && mine {
			return append(dst, s.without([]int{i}, false))
		}
		return dst
	}
	if out.OK {
		if !mine {
			return dst
		}
		if in.Op == Release {
			return append(dst, s.without([]int{i}, false))
		}
		return append(dst, s.renewed(i, op.Call, life))
	}
	if !mine {
		return append(dst, s) // not held by this owner: a refusal changes nothing
	}
	if s.Holders[i].Expiry <= op.End() {
		return append(dst, s.without([]int{i}, true))
	}
	return dst
}
