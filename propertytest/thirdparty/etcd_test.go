package thirdparty_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// etcdOptions are the suite's settings for etcd, which runs in real time
// with whole-second lease TTLs: a 1 s TTL (the shortest the embedded
// member grants); Slack for the server's expiry check, which runs every
// 500 ms, and the revocation through raft that follows, with room for a
// loaded machine; Settle for a watch event to reach a waiter.
func etcdOptions(claims ...propertytest.FaultKind) propertytest.Options {
	return propertytest.Options{
		TTL:    time.Second,
		Slack:  time.Second,
		Settle: 100 * time.Millisecond,
		Claims: claims,
	}
}

// etcdMutex is the Factory of the Mutex of go.etcd.io/etcd/client/v3/concurrency,
// one etcd client per client, on the embedded etcd s (real time: Clock is
// the system clock and Advance sleeps). Every run works under a key prefix
// of its own, so that one member serves all the runs of a test. With fenced
// false the adapter hands out no token: the Mutex used through Lock and
// Unlock alone.
//
// Mapping:
//   - One concurrency.Session per acquisition (its lease is the
//     acquisition's), WithTTL(TTL in whole seconds; another TTL is
//     refused, not rounded) and WithContext(ctx) of the call, and one
//     NewMutex(session, Prefix + name) on it.
//   - TryLock is Mutex.TryLock; concurrency.ErrLocked is locks.ErrLocked.
//     Lock is Mutex.Lock, which waits by watching its predecessor. On any
//     failure the session is closed (Orphan and Revoke), as etcd's
//     documented use does with defer s.Close().
//   - Watchdog: the session's keep-alive is etcd's watchdog. The suite
//     turns the watchdog off, so the adapter orphans the session as soon
//     as the Mutex call returns: the lease then lives one TTL from its
//     last renewal. A waiter's session is kept alive while it waits, as
//     the Mutex needs (and as lockproof's etcdlock does).
//   - Start: for TryLock, the moment before the session's lease was
//     granted (its keep-alives only extend it). After a Lock that may have
//     waited, the time of the last keep-alive is not known: the adapter
//     renews the lease once (KeepAliveOnce, what the keep-alive does every
//     TTL/3) and starts from that request; a lease found gone then is
//     reported as locks.ErrNotHeld (an unknown outcome to the suite).
//   - Token: the create revision of the lock key, which orders holders
//     (the Mutex grants the key with the smallest create revision), as
//     etcd's notes on lock and lease suggest. The Mutex keeps it
//     unexported; IsOwner's comparison carries it, and the adapter reads it
//     there.
//   - Renew is KeepAliveOnce of the session's lease; ErrLeaseNotFound is
//     locks.ErrNotHeld. Unlock is Mutex.Unlock (which deletes this
//     session's key and never says whether it was held), then the
//     session's Close, a Revoke of its lease; ErrLeaseNotFound from it is
//     locks.ErrNotHeld.
func etcdMutex(s *etcdfake.Server, fenced bool) propertytest.Factory {
	var runs atomic.Int64
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		prefix := s.Prefix() + "run" + strconv.FormatInt(runs.Add(1), 10) + "/"
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				o, err := locks.Resolve(prefix, opts...)
				if err != nil {
					return nil, err
				}
				if o.TTL%time.Second != 0 {
					return nil, fmt.Errorf("etcd adapter: TTL %v: etcd leases have whole-second TTLs", o.TTL)
				}
				c := s.NewClient()
				env.Cleanup(func() { _ = c.Close() }) // closed again, harmlessly, at the run's end
				acquire := func(wait bool) func(context.Context) (adapter.Grant, error) {
					return func(ctx context.Context) (adapter.Grant, error) {
						return etcdAcquire(ctx, c, o.Prefix+name, o, fenced, wait)
					}
				}
				return adapter.New(name, o, adapter.Lock{Lock: acquire(true), TryLock: acquire(false)})
			},
			Clock:   locks.SystemClock{},
			Advance: time.Sleep,
		}, nil
	}
}

// etcdAcquire makes one acquisition of key with the Mutex: Lock when wait,
// else TryLock.
func etcdAcquire(ctx context.Context, c *clientv3.Client, key string, o locks.Options, fenced, wait bool) (adapter.Grant, error) {
	start := o.Clock.Now()
	sess, err := concurrency.NewSession(c, concurrency.WithTTL(int(o.TTL/time.Second)), concurrency.WithContext(ctx))
	if err != nil {
		return adapter.Grant{}, fmt.Errorf("etcd adapter: new session: %w", err)
	}
	m := concurrency.NewMutex(sess, key)
	if wait {
		err = m.Lock(ctx)
	} else {
		err = m.TryLock(ctx)
	}
	sess.Orphan()
	if err == nil && wait {
		start = o.Clock.Now()
		_, err = c.KeepAliveOnce(ctx, sess.Lease())
		err = etcdNotHeld(err)
	}
	g := adapter.Grant{Start: start,
		Renew: func(ctx context.Context) error {
			_, err := c.KeepAliveOnce(ctx, sess.Lease())
			return etcdNotHeld(err)
		},
		Release: func(ctx context.Context) error {
			if err := m.Unlock(ctx); err != nil {
				return err
			}
			_, err := c.Revoke(ctx, sess.Lease())
			return etcdNotHeld(err)
		},
	}
	if err == nil && fenced {
		var rev int64
		rev, err = createRevision(m)
		g.Token, g.Fenced = locks.Token(rev), true
	}
	if err != nil {
		rctx, cancel := context.WithTimeout(context.Background(), o.RequestTimeout)
		_, _ = c.Revoke(rctx, sess.Lease()) // the session's Close: its lease may be gone already
		cancel()
		if errors.Is(err, concurrency.ErrLocked) {
			return adapter.Grant{}, adapter.Locked("etcd", err)
		}
		return adapter.Grant{}, err
	}
	return g, nil
}

// createRevision reads the create revision of the Mutex's key, which
// IsOwner compares against.
func createRevision(m *concurrency.Mutex) (int64, error) {
	cmp := m.IsOwner()
	rev, ok := cmp.TargetUnion.(*pb.Compare_CreateRevision)
	if !ok || rev.CreateRevision <= 0 {
		return 0, fmt.Errorf("etcd adapter: IsOwner gave no create revision: %v", cmp)
	}
	return rev.CreateRevision, nil
}

// etcdNotHeld maps a lease the server no longer has to locks.ErrNotHeld.
func etcdNotHeld(err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return adapter.NotHeld("etcd", err)
	}
	return err
}

// etcdTest starts the embedded etcd for a test and sets the short runs
// real time calls for: by default one run of about 8 actions (a run of
// real time lasts seconds: every Advance sleeps), with no more than a
// moment of shrinking (each shrink step is such a run); under
// LOCKPROOF_DEEP=1, 20 runs of 15 actions. -rapid.checks, when given,
// decides the number of runs.
func etcdTest(t *testing.T) *etcdfake.Server {
	t.Helper()
	s := etcdfake.New(t)
	if s.Real() {
		t.Skip("the etcd adapter runs on the embedded member: a shared real cluster's lease timing is not ours")
	}
	t.Logf("embedded etcd started in %v", s.StartupTime().Round(time.Millisecond))
	deep := suitemain.Deep()
	switch {
	case suitemain.ChecksGiven():
	case deep:
		suitemain.SetFlag(t, "rapid.checks", "20")
	default:
		suitemain.SetFlag(t, "rapid.checks", "1")
	}
	if deep {
		suitemain.SetFlag(t, "rapid.steps", "15")
	} else {
		suitemain.SetFlag(t, "rapid.steps", "8")
		suitemain.SetFlag(t, "rapid.shrinktime", "1ms")
	}
	return s
}

// The etcd locks pass the claims they make for themselves, each in a
// parallel subtest on one embedded etcd: their runs keep real time and
// mostly sleep (every Advance), so side by side they take the time of the
// slowest instead of the sum. Their keys do not meet (each Factory gives
// every run a prefix of its own), and the subtests share the rapid flags
// etcdTest and the seed set here, since rapid reads them as it runs.
//
//   - etcd's Mutex, with its key's create revision as a fencing token,
//     claims mutual exclusion under crashes and, fenced, under pauses.
//   - kvtools/etcdv3 claims mutual exclusion across client crashes (a
//     session's lease); it has no fencing token, so no claim about paused
//     holders.
//   - Scalingo/go-etcd-lock claims mutual exclusion for ttl seconds from a
//     grant, across client crashes; no fencing token either.
func TestThirdPartyEtcdLocks(t *testing.T) {
	s := etcdTest(t)
	useSeed(t, 0xe7cd)
	for _, c := range []struct {
		name string
		f    propertytest.Factory
		o    propertytest.Options
	}{
		{"EtcdMutex", etcdMutex(s, true), etcdOptions(propertytest.FaultCrash, propertytest.FaultPause)},
		{"KvtoolsEtcdv3", kvEtcdLock(s), etcdOptions(propertytest.FaultCrash)},
		{"ScalingoEtcdLock", scalingoLock(s), etcdOptions(propertytest.FaultCrash)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			passesOwnClaims(t, c.f, c.o)
		})
	}
}

// Without its revision as a token (Lock and Unlock alone), etcd's Mutex
// cannot be safe under pauses: held to that claim, it must be caught. In
// real time this takes about 40 s (seed 59347: the first run pauses a
// holder past its lease, then shrinking and the replay are runs of about
// 14 s each), beyond the default budget: it runs with LOCKPROOF_DEEP=1.
// The same power of the suite is asserted by default, in manual time, on
// redsync, bsm/redislock and Consul.
func TestThirdPartyEtcdMutexUnfencedClaimingPause(t *testing.T) {
	if !suitemain.Deep() {
		t.Skip("real-time etcd needs about 40 s to reach, shrink and report a paused holder: run with LOCKPROOF_DEEP=1")
	}
	s := etcdTest(t)
	strongerClaim(t, 59347, etcdMutex(s, false), etcdOptions(propertytest.FaultCrash, propertytest.FaultPause), propertytest.Exclusivity)
}

// The adapter's token is the create revision of the holder's key, as the
// server has it, and grows from one acquisition to the next.
func TestThirdPartyEtcdTokenIsCreateRevision(t *testing.T) {
	s := etcdfake.New(t)
	be, err := etcdMutex(s, true)(t)
	if err != nil {
		t.Fatal(err)
	}
	l, err := be.NewLocker("token", locks.WithTTL(time.Second), locks.WithWatchdog(false))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last locks.Token
	for i := range 2 {
		lease, err := l.TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock %d: %v", i, err)
		}
		tok, ok := lease.Token()
		resp, err := s.Client().Get(ctx, s.Prefix()+"run1/token/", clientv3.WithFirstCreate()...)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || len(resp.Kvs) != 1 || locks.Token(resp.Kvs[0].CreateRevision) != tok || tok <= last {
			t.Fatalf("acquisition %d: token %v (ok %v) after %v; holder's key on the server: %v", i, tok, ok, last, resp.Kvs)
		}
		last = tok
		if err := lease.Unlock(ctx); err != nil {
			t.Fatalf("Unlock %d: %v", i, err)
		}
	}
}
