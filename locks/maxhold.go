package locks

import "time"

// WithMaxHold bounds how long a lease lives from its grant (default: no
// bound). Once d has passed since the request that granted the lease was
// sent, by Options.Clock, the lease ends whatever the watchdog would do:
// it stops renewing, Done closes with Err wrapping ErrMaxHold, and then
// (never before) the lock is released on the backend, owner-checked and
// best effort as Unlock is. Deadline never reaches past the bound, a Renew
// before it extends the lease only up to it, and Renew after it returns
// ErrMaxHold. A later Unlock returns ErrMaxHold too, and sends no second
// release if the first one succeeded.
//
// d must be zero (no bound) or at least the request timeout
// (WithRequestTimeout, default TTL/10): a shorter bound could end the lease
// before the request that grants it has had its time. It may be longer than
// the TTL: that is the case it is for, a watchdog renewing a lease whose
// holder has hung. Re-entries by the same owner (WithOwner) share their
// acquisition's bound: acquiring again does not restart it.
func WithMaxHold(d time.Duration) Option { return func(o *Options) { o.MaxHold = d } }
