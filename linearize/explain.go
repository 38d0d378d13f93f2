package linearize

import (
	"fmt"
	"time"
)

// ExplainLease names in words what makes a lease-lock history illegal,
// where the operations show it without search:
//
//   - a fencing token granted after a grant of a token as high or higher
//     had returned: "token 9 granted after token 11 (…)";
//   - a grant while the lease of another owner still ran: that lease was
//     granted (or last renewed) by a call whose time plus ttl minus
//     tolerance is after the second grant returned, and its owner made no
//     release that could have ended it before: "client 2 granted (token 5)
//     at 3.3s while client 1's lease (granted at 1s, TTL 5s) still ran
//     (until 5.999s at the earliest)".
//
// Times are nanoseconds, as NewLeaseModel reads them, and ttl and
// tolerance are the model's. Give it a counterexample (the operations of
// Result.Counterexample): it returns nothing for what it cannot name so
// simply, such as a violation that needs an unknown outcome to show.
func ExplainLease(h []Operation[LeaseInput, LeaseOutput], ttl, tolerance time.Duration) []string {
	var out []string
	granted := func(op *Operation[LeaseInput, LeaseOutput]) bool {
		return op.Input.Op == Acquire && !op.Unknown && op.Output.OK
	}
	for i := range h {
		b := &h[i]
		if !granted(b) {
			continue
		}
		for j := range h {
			a := &h[j]
			if i == j || !granted(a) || a.Input.Lock != b.Input.Lock {
				continue
			}
			if a.Return < b.Call && b.Output.Token <= a.Output.Token {
				out = append(out, fmt.Sprintf("token %d granted after token %d (client %d granted token %d at %s; client %d granted token %d at %s)",
					b.Output.Token, a.Output.Token, a.ClientID, a.Output.Token, nsText(a.Return), b.ClientID, b.Output.Token, nsText(b.Return)))
			}
			if a.Input.Owner == b.Input.Owner || a.Return > b.Return || a.Return == b.Return && j > i {
				continue // each pair once: the later grant blamed, the first in order at a tie
			}
			if end, renewedAt, ok := leaseRunning(h, a, b.Return, ttl, tolerance); ok {
				renewed := ""
				if renewedAt > a.Call {
					renewed = ", renewed at " + nsText(renewedAt)
				}
				out = append(out, fmt.Sprintf("client %d granted (token %d) at %s while client %d's lease (granted at %s%s, TTL %v) still ran (until %s at the earliest)",
					b.ClientID, b.Output.Token, nsText(b.Return), a.ClientID, nsText(a.Return), renewed, ttl, nsText(end)))
			}
		}
	}
	return out
}

// leaseRunning reports whether the lease a granted must still have run at
// instant at, until when at the earliest, and the call of the last renewal
// that extended it (a's call if none): a's own renewals that returned by
// then extend it, the grant's reported deadline may end it sooner (see
// LeaseOutput.Deadline), and a release (or renewal) of its owner that may
// have failed or freed the lock before then ends the argument.
func leaseRunning(h []Operation[LeaseInput, LeaseOutput], a *Operation[LeaseInput, LeaseOutput], at int64, ttl, tolerance time.Duration) (end, renewedAt int64, ok bool) {
	life := int64(ttl - tolerance)
	end, renewedAt = leaseEnd(a, a.Call, life), a.Call
	for k := range h {
		op := &h[k]
		if op.Input.Owner != a.Input.Owner || op.Input.Lock != a.Input.Lock || op == a || op.Call < a.Call || op.Call >= at {
			continue
		}
		switch {
		case op.Input.Op == Renew && !op.Unknown && op.Output.OK && op.Return <= at:
			if e := satAdd(op.Call, life); e > end {
				end, renewedAt = e, op.Call
			}
		case op.Input.Op == Release || op.Input.Op == Renew:
			return 0, 0, false // the owner may have let it go, or lost it, before at
		}
	}
	return end, renewedAt, at < end
}

// RoundDuration rounds d for people reading a history as text: to 0.1 ms
// from a second on (9.6333s, not 9.633333332s), to the microsecond from a
// millisecond on (1.235ms). Histories written as JSON keep exact times.
func RoundDuration(d time.Duration) time.Duration {
	switch a := max(d, -d); {
	case a >= time.Second:
		return d.Round(100 * time.Microsecond)
	case a >= time.Millisecond:
		return d.Round(time.Microsecond)
	}
	return d
}

// nsText shows a time of a lease history (nanoseconds) as a rounded
// duration.
func nsText(ns int64) string { return RoundDuration(time.Duration(ns)).String() }
