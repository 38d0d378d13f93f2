package consullock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/locks"
)

// leaseOps are the owner-checked operations on one acquisition: the owner
// is the session.
type leaseOps struct {
	l       *Locker
	key     string // the key held: the lock's, or a permit's
	session string
	entries []string    // the session's other keys, deleted at release: its queue entry, a reader's key
	lost    atomic.Bool // the monitor saw the key leave the session
	lease   atomic.Pointer[locks.ManagedLease]
}

var _ locks.LeaseOps = (*leaseOps)(nil)

// Renew renews the session. It returns locks.ErrNotHeld when the session is
// gone (Consul answers 404) or the monitor saw the key leave it.
//
// A renewal sent before the lease's local deadline may reach the server
// after it: the server then renews a session whose lease has ended, which
// nobody will release, and which keeps the key from everybody for up to
// 2×TTL (and the lock-delay) more. So a renewal that comes back after the
// lease ended gives the key up and destroys the session, as Unlock would,
// and returns an error wrapping locks.ErrLeaseExpired: the renewal
// extended nothing that anyone holds.
func (o *leaseOps) Renew(ctx context.Context) error {
	if o.lost.Load() {
		return fmt.Errorf("consullock: the key no longer holds session %s: %w", o.session, locks.ErrNotHeld)
	}
	rctx, cancel := o.l.request(ctx)
	defer cancel()
	e, _, err := o.l.client.Session().Renew(o.session, writeOpts(rctx))
	if err != nil {
		return fmt.Errorf("consullock: renew session: %w", err)
	}
	if e == nil {
		return fmt.Errorf("consullock: session %s invalidated: %w", o.session, locks.ErrNotHeld)
	}
	if lease := o.lease.Load(); lease != nil && lease.Err() != nil {
		o.giveUp(ctx)
		return fmt.Errorf("consullock: session %s renewed after its lease ended, and given up: %w", o.session, locks.ErrLeaseExpired)
	}
	return nil
}

// giveUp releases the key and destroys the session of a lease that has
// ended, on a request context of its own (ctx's values, not its end).
func (o *leaseOps) giveUp(ctx context.Context) {
	rctx, cancel := o.l.request(context.WithoutCancel(ctx))
	defer cancel()
	if err := o.l.releaseAndDestroy(rctx, o.key, o.session, o.entries...); err != nil && !errors.Is(err, locks.ErrNotHeld) {
		o.l.opt.Logger.Warn("lockproof: could not give up a session renewed after its lease ended; it will expire by its TTL",
			"lock", o.l.name, "session", o.session, "err", err)
	}
}

// Release releases the key, deletes the session's other keys and destroys
// the session.
func (o *leaseOps) Release(ctx context.Context) error {
	rctx, cancel := o.l.request(ctx)
	defer cancel()
	return o.l.releaseAndDestroy(rctx, o.key, o.session, o.entries...)
}

// monitor watches the key with blocking queries for as long as the lease
// lives, and ends it as soon as the key no longer shows the session: a
// session invalidated on the server (TTL, destroy, failed node check), a
// key deleted or released by someone else. The watchdog's renewals alone
// would notice only at the next renewal, up to TTL/3 later, and api.Lock's
// own monitor only when the session's key changes while it happens to
// watch (hashicorp/consul#18271). It stops when Done closes.
func (o *leaseOps) monitor(lease *locks.ManagedLease, index uint64) {
	o.lease.Store(lease)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-lease.Done()
		cancel()
	}()
	go func() {
		defer cancel()
		for {
			q := (&api.QueryOptions{WaitIndex: index, WaitTime: maxBlock}).WithContext(ctx)
			pair, meta, err := o.l.client.KV().Get(o.key, q)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				// The watchdog's renewals decide whether the lease survives
				// an unreachable server; look again a little later.
				if !o.l.pause(ctx, o.l.opt.TTL/10) {
					return
				}
				continue
			case pair == nil || pair.Session != o.session:
				o.lost.Store(true)
				_ = lease.Renew(ctx) // fails with ErrNotHeld, which ends the lease
				return
			}
			index = nextIndex(index, meta.LastIndex)
		}
	}()
}

// pause waits d on the Locker's clock; false if ctx ended first.
func (l *Locker) pause(ctx context.Context, d time.Duration) bool {
	t := l.opt.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// nextIndex returns the index for the next blocking query, after one sent
// with prev answered got: got, except that an index going backwards (a
// restored snapshot, another server) restarts from 0, an immediate read,
// and that an index is never 0 after a read (Consul's guidance: a 0 would
// make every following query return at once).
func nextIndex(prev, got uint64) uint64 {
	if got < prev {
		return 0
	}
	return max(got, 1)
}
