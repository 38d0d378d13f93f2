package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproof/lockproof/locks"
)

// maxIdle bounds the sessions a Locker keeps for reuse; more are left to
// expire on the server.
const maxIdle = 64

// session is one etcd lease, used by one contender at a time: a waiter
// renews it while it waits, the holder's watchdog while it holds. Nothing
// renews it while it sits idle in a Locker, so it lives one TTL from its
// last renewal.
type session struct {
	id clientv3.LeaseID

	mu      sync.Mutex
	renewed time.Time // when the last successful grant or keep-alive was sent
}

func (s *session) renewedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewed
}

func (s *session) setRenewed(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.After(s.renewed) {
		s.renewed = t
	}
}

// fresh reports whether s was renewed less than a third of the TTL ago, the
// watchdog's period: a lease built on it starts with most of its TTL.
func (l *Locker) fresh(s *session) bool {
	return l.opt.Clock.Now().Sub(s.renewedAt()) < l.opt.TTL/3
}

// valid reports whether s may still live, by the local, conservative
// estimate of its expiry.
func (l *Locker) valid(s *session) bool {
	return l.opt.Clock.Now().Before(s.renewedAt().Add(l.opt.TTL - locks.Drift(l.opt.TTL)))
}

// take returns a session for one contender: an idle one, renewed first if it
// is not fresh, or a new lease, asked for again while a grant gets no
// answer within the request timeout and ctx lasts.
func (l *Locker) take(ctx context.Context) (*session, error) {
	for {
		s := l.popIdle()
		if s == nil {
			break
		}
		if l.fresh(s) {
			return s, nil
		}
		err := l.keepAlive(ctx, s)
		if err == nil {
			return s, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, l.errorf("lock: %w", ctxErr)
		}
		// Lost or unreachable: leave it to expire and try the next.
	}
	var (
		start time.Time // when the grant that answered was sent
		resp  *clientv3.LeaseGrantResponse
	)
	err := l.resend(ctx, func(ctx context.Context) (err error) {
		start = l.opt.Clock.Now()
		resp, err = l.client.Grant(ctx, l.ttlSec) // one granted unseen is never renewed, and expires
		return err
	})
	if err != nil {
		return nil, l.errorf("grant a lease: %w", err)
	}
	return &session{id: resp.ID, renewed: start}, nil
}

// errRequestTimeout marks a request that got no answer within the request
// timeout while its caller's ctx lasted (see bounded).
var errRequestTimeout = errors.New("no answer within the request timeout")

// bounded sends one request, f, bounded by the request timeout (wall
// time) within ctx. When that bound alone ran out, the error wraps
// errRequestTimeout, which is transient: etcd's client sends requests to
// the members in turn (round robin), and one that is frozen, or cut off
// while its connection stays open, holds every request sent to it until
// the caller gives up; the next request goes to another member.
func (l *Locker) bounded(ctx context.Context, f func(context.Context) error) error {
	rctx, cancel := locks.RequestContext(ctx, l.opt.RequestTimeout)
	defer cancel()
	err := f(rctx)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		return fmt.Errorf("%w: %w", errRequestTimeout, err)
	}
	return err
}

// resend sends f as bounded does, and sends it again while it gets no
// answer within the request timeout and ctx lasts: etcd's client sends the
// next copy to the next member. Only for requests that may be applied
// twice (reads, grants, renewals).
func (l *Locker) resend(ctx context.Context, f func(context.Context) error) error {
	for {
		if err := l.bounded(ctx, f); !errors.Is(err, errRequestTimeout) {
			return err
		}
	}
}

// popIdle returns the most recently used idle session that may still live,
// dropping those that may not.
func (l *Locker) popIdle() *session {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.idle) > 0 {
		s := l.idle[len(l.idle)-1]
		l.idle[len(l.idle)-1] = nil
		l.idle = l.idle[:len(l.idle)-1]
		if l.valid(s) {
			return s
		}
	}
	return nil
}

// putIdle keeps s for the next contender.
func (l *Locker) putIdle(s *session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.idle) < maxIdle {
		l.idle = append(l.idle, s)
	}
}

// keepAlive renews s once, each request bounded by the request timeout
// and sent again while one gets no answer within it and ctx lasts. A lease
// the server no longer has gives an error wrapping ErrSessionLost and
// locks.ErrNotHeld.
func (l *Locker) keepAlive(ctx context.Context, s *session) error {
	var start time.Time // when the renewal that answered was sent
	err := l.resend(ctx, func(ctx context.Context) error {
		start = l.opt.Clock.Now()
		_, err := l.client.KeepAliveOnce(ctx, s.id)
		return err
	})
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%w (lease %x): %w", ErrSessionLost, int64(s.id), locks.ErrNotHeld)
	case err != nil:
		return fmt.Errorf("etcdlock: renew lease %x: %w", int64(s.id), err)
	}
	s.setRenewed(start)
	return nil
}

// maxDoubts bounds how many times in a row renewOwn sends a keep-alive
// again after a member answered that a lease is gone while a read finds
// its key: every member of a 3-member cluster has then been asked.
const maxDoubts = 3

// renewOwn renews session s of the contender whose key is key, created at
// revision rev. A member's answer that the lease is gone is believed only
// once a linearizable read finds the key gone too: the server deletes a
// lease's keys in the same step as the lease, so a key still there proves
// the lease alive. An etcd leader cut off from the others answers
// keep-alives from its own table of leases until it steps down, and so
// knows no lease granted since it was cut off: the key of a lock granted
// through the majority has a lease that leader calls gone (etcd before
// 3.4.31 and 3.5.13, which first check their leadership; etcd issue
// 15247). The keep-alive is then sent again, to the next member. With key
// empty (a naive waiter, which has no key yet), the answer is believed.
func (l *Locker) renewOwn(ctx context.Context, s *session, key string, rev int64) error {
	for doubts := 0; ; doubts++ {
		err := l.keepAlive(ctx, s)
		if key == "" || !errors.Is(err, ErrSessionLost) {
			return err
		}
		there, rerr := l.keyThere(ctx, s, key, rev)
		switch {
		case rerr != nil:
			return fmt.Errorf("etcdlock: a member answered that lease %x is gone, and reading key %s to confirm it failed: %w",
				int64(s.id), key, rerr)
		case !there:
			return err
		case doubts+1 >= maxDoubts:
			return fmt.Errorf("etcdlock: %d members answered that lease %x is gone while its key %s is there", maxDoubts, int64(s.id), key)
		}
		l.opt.Logger.Warn("lockproof: a member answered that a lease is gone while its key is there (a cut-off leader?); renewing through the next",
			"lock", l.name, "key", key, "lease", fmt.Sprintf("%x", int64(s.id)))
	}
}

// keyThere reports, by a linearizable read, whether key exists with create
// revision rev and session s's lease.
func (l *Locker) keyThere(ctx context.Context, s *session, key string, rev int64) (bool, error) {
	var resp *clientv3.GetResponse
	err := l.resend(ctx, func(ctx context.Context) (err error) {
		resp, err = l.client.Get(ctx, key, clientv3.WithKeysOnly())
		return err
	})
	if err != nil {
		return false, err
	}
	return len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision == rev && clientv3.LeaseID(resp.Kvs[0].Lease) == s.id, nil
}
