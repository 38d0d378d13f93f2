package thirdparty_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// consulTTL is api.Lock's default session TTL (api.DefaultLockSessionTTL),
// and its sessions keep Consul's default lock-delay, 15 s as well.
const (
	consulTTL       = 15 * time.Second
	consulLockDelay = 15 * time.Second
)

// consulOptions are the suite's settings for api.Lock on miniconsul in
// manual time. Consul invalidates a session no earlier than its TTL after
// the last renewal and, as miniconsul by default, at twice the TTL; then
// the key is held back for the lock-delay. Slack covers both, and the
// suite's deadlock-freedom probe steps of TTL/4. OpTimeout is short in
// wall time: every request is local, and a TryLock that meets the
// lock-delay sleeps 5 s of wall time in api.Lock (DefaultLockRetryTime)
// before it gives up, cut short by its ctx. Waiters whose session ran out
// leave unknown acquires in the history, which make some histories slow to
// check: CheckTimeLimit bounds that (an undecided check is logged and
// counted, never a pass).
func consulOptions(claims ...propertytest.FaultKind) propertytest.Options {
	return propertytest.Options{
		TTL:            consulTTL,
		Slack:          consulTTL + consulLockDelay + consulTTL/4,
		Settle:         30 * time.Millisecond,
		OpTimeout:      100 * time.Millisecond,
		CheckTimeLimit: 3 * time.Second,
		Claims:         claims,
	}
}

// consulLock is the Factory of github.com/hashicorp/consul/api's Lock on
// miniconsul in manual time (consulfake.New with ConsulManualTime and
// ForceMiniconsul), one HTTP transport per client.
//
// Mapping:
//   - One session per acquisition, made by the adapter as api.Lock makes
//     its own (name api.DefaultLockSessionName, TTL the suite's, the
//     server's default lock-delay, behaviour release), and given to
//     LockOpts as Session. api.Lock renews a session it made itself with
//     RenewPeriodic on the wall clock until Unlock; the suite turns the
//     watchdog off and runs on a manual clock, so the adapter renews the
//     session itself (adapter.KeepAlive), every TTL/2 of the run's clock
//     as RenewPeriodic does, only while Lock runs, and never once the lock
//     is held.
//   - TryLock: the kit's, from Lock (Lock.WouldWait): api.Lock reads the
//     key and, if it is free, acquires it; it gives up before the first
//     blocking query (a request with an index), which api.Lock sends only
//     to wait for a holder, and that is locks.ErrLocked. A TryLock that
//     meets the lock-delay sleeps api.Lock's 5 s of wall time before it
//     would ask again, cut short by its ctx (OpTimeout). Lock is Lock with
//     the default LockWaitTime (15 s blocking queries) and ctx.Done() as
//     its stop channel; stopped (nil, nil) is ctx.Err(). api.Lock does not
//     watch the stop channel during a blocking query (LockWaitTime bounds
//     its cancellation, on the server's clock, which stands still in
//     manual time): the requests it makes while the call runs carry the
//     call's ctx, as the connections of a process that stops are closed.
//     The requests of its monitor (RequireConsistent reads, which nothing
//     else here makes) never do.
//   - Start: the send time of the session's creation or of its last
//     successful renewal while Lock waited: Consul does not invalidate a
//     session before TTL after either. An Advance longer than twice the
//     TTL jumps past a waiter's session expiry before its renewal can run,
//     as a pause of the waiting process would: its acquire then fails
//     with "invalid session", an unknown outcome to the suite.
//   - The lost-lock channel Lock returns: once it is closed, the lease's
//     Err reports locks.ErrNotHeld (and its Done is closed).
//   - No fencing token: api.Lock exposes none. The lease's Token reports
//     none (ok false).
//   - Renew is Session().Renew; an unknown session (nil entry) is
//     locks.ErrNotHeld. Unlock is Lock.Unlock; ErrLockNotHeld is
//     locks.ErrNotHeld. Lock.Unlock ignores whether the server released
//     the key (it reports only transport errors); within the lease's
//     deadline the session, and so the key, is still ours. Like api.Lock
//     with a session of its own, Unlock leaves the session to expire.
func consulLock() propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		s, err := consulfake.Start(consulfake.ManualTime(epoch), consulfake.ForceMiniconsul())
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the Consul fake", s)
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				o, err := locks.Resolve(s.Prefix(), append(s.LockOptions(), opts...)...)
				if err != nil {
					return nil, err
				}
				// In memory, as the fake's own clients: no request waits
				// in the kernel, so the scheduler needs no sleep to see
				// the process quiescent (Backend.InProcess).
				tr := &http.Transport{DialContext: s.Miniconsul().DialInMemory}
				env.Cleanup(tr.CloseIdleConnections)
				c := &consulClient{addr: s.Addr(), tr: tr, key: o.Prefix + name, o: o}
				return adapter.New(name, o, adapter.Lock{Lock: c.lock, WouldWait: consulBlocking})
			},
			Clock:     s.Clock(),
			Advance:   s.Advance,
			InProcess: true,
		}, nil
	}
}

// consulClient is one client's connection to the server.
type consulClient struct {
	addr string
	tr   *http.Transport
	key  string
	o    locks.Options
}

// callTransport gives the requests made while a Lock call runs that call's
// ctx, except the monitor's (RequireConsistent) reads.
type callTransport struct {
	base http.RoundTripper
	call atomic.Pointer[context.Context]
}

func (c *callTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if ctx := c.call.Load(); ctx != nil && !r.URL.Query().Has("consistent") {
		r = r.WithContext(*ctx)
	}
	return c.base.RoundTrip(r)
}

// consulBlocking names api.Lock's blocking query, the first request of a
// wait.
func consulBlocking(_ []string, next string) bool { return strings.HasSuffix(next, "(blocking)") }

func (c *consulClient) lock(ctx context.Context) (adapter.Grant, error) {
	// The call's ctx, once set, reaches the fake's gate (a locks.Gate the
	// suite put in it sees the requests of the Lock call).
	ct := &callTransport{base: consulfake.GateTransport(c.tr)}
	client, err := api.NewClient(&api.Config{Address: c.addr, Scheme: "http", HttpClient: &http.Client{Transport: ct}})
	if err != nil {
		return adapter.Grant{}, err
	}
	created := c.o.Clock.Now()
	id, _, err := client.Session().Create(&api.SessionEntry{Name: api.DefaultLockSessionName, TTL: c.o.TTL.String()},
		(&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return adapter.Grant{}, fmt.Errorf("consul adapter: create session: %w", err)
	}
	l, err := client.LockOpts(&api.LockOptions{Key: c.key, Session: id})
	if err != nil {
		return adapter.Grant{}, err
	}
	renewed := adapter.KeepAlive(c.o.Clock, c.o.TTL/2, created, func() error {
		e, _, err := client.Session().Renew(id, nil)
		if err == nil && e == nil {
			err = fmt.Errorf("session %s not found", id)
		}
		return err
	})
	ct.call.Store(&ctx)
	lost, err := l.Lock(ctx.Done())
	ct.call.Store(nil)
	start := renewed()
	switch {
	case err != nil:
		return adapter.Grant{}, fmt.Errorf("consul adapter: %w", err)
	case lost == nil:
		return adapter.Grant{}, fmt.Errorf("consul adapter: lock: %w", ctx.Err())
	}
	return adapter.Grant{Start: start, Lost: lost,
		Renew: func(ctx context.Context) error {
			e, _, err := client.Session().Renew(id, (&api.WriteOptions{}).WithContext(ctx))
			switch {
			case err != nil:
				return err
			case e == nil:
				return adapter.NotHeld("consul", fmt.Errorf("session %s not found", id))
			}
			return nil
		},
		Release: func(context.Context) error {
			err := l.Unlock()
			if errors.Is(err, api.ErrLockNotHeld) {
				return adapter.NotHeld("consul", err)
			}
			return err
		},
	}, nil
}

// Consul's api.Lock claims mutual exclusion while its session lives, with
// no fencing token: run with Claims crash only, the suite must pass.
func TestThirdPartyConsulLock(t *testing.T) {
	suitemain.SetChecks(t, 6) // each run waits out TryLocks that meet the lock-delay (OpTimeout)
	ownClaims(t, 0xc0751, consulLock(), consulOptions(propertytest.FaultCrash))
}

// Held to pause safety, which needs fencing, api.Lock must be caught
// losing an update of a paused holder: its lock-delay does not save a
// holder paused past its session's invalidation. By default it is caught
// in the first run of its seed (quickSeed), under LOCKPROOF_DEEP=1 after a
// search of passing runs.
func TestThirdPartyConsulLockClaimingPause(t *testing.T) {
	suitemain.SetChecks(t, 200) // stops at the first failure
	strongerClaim(t, quickSeed(788315, 0xc0751), consulLock(), consulOptions(propertytest.FaultCrash, propertytest.FaultPause), propertytest.Exclusivity)
}
