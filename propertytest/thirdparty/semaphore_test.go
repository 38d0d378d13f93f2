package thirdparty_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// semLimit is the number of holders the semaphore admits.
const semLimit = 2

// semOptions are the suite's settings for api.Semaphore (limit 2, three
// clients) on miniconsul in manual time, with sessions ending exactly at
// their TTL: TTL is the session's, Consul's shortest; Slack covers the
// deadlock-freedom probe's steps. OpTimeout is short in wall time: every
// request is in memory.
func semOptions() propertytest.Options {
	return propertytest.Options{
		TTL:            kvConsulTTL,
		Slack:          kvConsulTTL / 2,
		Settle:         30 * time.Millisecond,
		OpTimeout:      100 * time.Millisecond,
		CheckTimeLimit: 3 * time.Second,
		Permits:        semLimit,
		Clients:        3,
		Claims:         []propertytest.FaultKind{propertytest.FaultCrash},
	}
}

// semaphore is the Factory of github.com/hashicorp/consul/api's
// Semaphore (v1.34.5), limit 2, on miniconsul in manual time with
// sessions that end exactly at their TTL (see kvConsulLock for why).
//
// Mapping:
//   - One api.Semaphore per acquisition (Client.SemaphoreOpts: Prefix the
//     lock's key, Limit 2, SessionTTL the suite's TTL), which creates its
//     own session in Acquire and renews it with RenewPeriodic on the wall
//     clock until Release. One api.Client per client, dialed in memory
//     through a fakes.Conns of its own; the requests the semaphore sends
//     while a call runs (it sends them without a context) carry the call's
//     context (callTransport), except its monitor's consistent reads.
//   - Lock is Acquire(ctx.Done()); a nil lost channel (stopped) is no
//     permit, ctx.Err().
//   - TryLock is the library's own one-shot mode (SemaphoreTryOnce, with a
//     SemaphoreWaitTime of 1 ns): one read of the prefix and, if a permit
//     is free, one compare-and-set of the holders' record; if another
//     contender's compare-and-set landed first, api.Semaphore gives up
//     rather than read again, though a permit may still be free: a
//     spurious refusal (Report.SpuriousRefusals). With wouldWait, TryLock
//     is the kit's instead (Lock.WouldWait: given up before the first
//     blocking query), which reads again after a lost compare-and-set.
//   - Deadline: the kit's, from the start of the call, before the session
//     is created; the wall-time renewals are never counted.
//   - No Renew: the session is the semaphore's and its id is not exposed
//     (noRenew).
//   - Unlock is Release; ErrSemaphoreNotHeld is locks.ErrNotHeld. Lost:
//     the lost channel Acquire returns. No fencing token.
//   - Crash: the client's connections are severed (adapter.WithCrash).
func semaphore(wouldWait bool) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		s, err := consulfake.Start(consulfake.ManualTime(epoch), consulfake.ForceMiniconsul(), consulfake.SessionTTLMultiplier(1))
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
				c, err := newSemClient(env, s, o.Prefix+name, o.TTL)
				if err != nil {
					return nil, err
				}
				l := adapter.Lock{Lock: c.acquire(false), TryLock: c.acquire(true)}
				if wouldWait {
					l = adapter.Lock{Lock: c.acquire(false), WouldWait: consulBlocking}
				}
				lk, err := adapter.New(name, o, l)
				if err != nil {
					return nil, err
				}
				return adapter.WithCrash(lk, c.conns.Sever), nil
			},
			Clock:     s.Clock(),
			Advance:   s.Advance,
			InProcess: true,
		}, nil
	}
}

// semClient is one client of the semaphore.
type semClient struct {
	client *api.Client
	ct     *callTransport
	conns  *fakes.Conns
	prefix string
	ttl    time.Duration
}

func newSemClient(env propertytest.Env, s *consulfake.Server, prefix string, ttl time.Duration) (*semClient, error) {
	conns := fakes.NewConns()
	tr := &http.Transport{DialContext: conns.Dial(s.DialContext)}
	env.Cleanup(func() {
		conns.Sever()
		tr.CloseIdleConnections()
	})
	ct := &callTransport{base: consulfake.GateTransport(tr)}
	client, err := api.NewClient(&api.Config{Address: s.Addr(), Scheme: "http", HttpClient: &http.Client{Transport: ct}})
	if err != nil {
		return nil, err
	}
	return &semClient{client: client, ct: ct, conns: conns, prefix: prefix, ttl: ttl}, nil
}

// acquire is one Acquire of a new semaphore: once (the library's one-shot
// mode) or waiting.
func (c *semClient) acquire(once bool) func(context.Context) (adapter.Grant, error) {
	return func(ctx context.Context) (adapter.Grant, error) {
		o := &api.SemaphoreOptions{Prefix: c.prefix, Limit: semLimit, SessionTTL: c.ttl.String()}
		if once {
			o.SemaphoreTryOnce, o.SemaphoreWaitTime = true, time.Nanosecond
		}
		sem, err := c.client.SemaphoreOpts(o)
		if err != nil {
			return adapter.Grant{}, err
		}
		c.ct.call.Store(&ctx)
		lost, err := sem.Acquire(ctx.Done())
		c.ct.call.Store(nil)
		switch {
		case err != nil:
			return adapter.Grant{}, fmt.Errorf("consul semaphore: %w", err)
		case lost == nil && once && ctx.Err() == nil:
			return adapter.Grant{}, adapter.Locked("consul semaphore", errors.New("no permit in one attempt"))
		case lost == nil:
			return adapter.Grant{}, fmt.Errorf("consul semaphore: acquire stopped: %w", errNoLock(ctx))
		}
		return adapter.Grant{Lost: lost, Renew: noRenew("api.Semaphore"), Release: func(rctx context.Context) error {
			c.ct.call.Store(&rctx)
			err := sem.Release()
			c.ct.call.Store(nil)
			if errors.Is(err, api.ErrSemaphoreNotHeld) {
				return adapter.NotHeld("consul semaphore", err)
			}
			return err
		}}, nil
	}
}

// api.Semaphore claims at most Limit holders while their sessions live,
// with no fencing token: run with Claims crash only, its one-shot TryLock
// included, the suite must pass.
func TestThirdPartyConsulSemaphore(t *testing.T) {
	suitemain.SetChecks(t, 6)
	rep := ownClaims(t, 0x5e4a, semaphore(false), semOptions())
	t.Logf("outcomes %v; spurious refusals %d", rep.Outcomes, rep.SpuriousRefusals)
}

// The same with the kit's TryLock (given up at the first blocking query).
func TestThirdPartyConsulSemaphoreWouldWait(t *testing.T) {
	suitemain.SetChecks(t, 4)
	rep := ownClaims(t, 0x5e4a, semaphore(true), semOptions())
	t.Logf("outcomes %v; spurious refusals %d", rep.Outcomes, rep.SpuriousRefusals)
}

// holdGate is a locks.Gate that holds the first request whose name starts
// with what until
// release is closed, and reports on reached when it got there.
type holdGate struct {
	what             string
	reached, release chan struct{}
	held             bool
}

func (g *holdGate) Request(_ context.Context, what string) func() {
	if strings.HasPrefix(what, g.what) && !g.held {
		g.held = true
		close(g.reached)
		<-g.release
	}
	return func() {}
}

// api.Semaphore's one-shot TryLock gives up when it loses the race for the
// holders' record, though a permit is still free: b reads the record (no
// holder), a takes a permit meanwhile, b's compare-and-set then fails, and
// b is refused with one of the two permits free. The suite counts such a
// refusal (Report.SpuriousRefusals) and tolerates it once: it is no
// deadlock, the next attempt is granted.
func TestThirdPartyConsulSemaphoreSpuriousRefusal(t *testing.T) {
	s := consulfake.New(t, consulfake.ManualTime(epoch), consulfake.ForceMiniconsul(), consulfake.SessionTTLMultiplier(1))
	newClient := func() *semClient {
		c, err := newSemClient(t, s, s.Prefix()+"spurious", kvConsulTTL)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := newClient(), newClient()
	ctx := context.Background()
	g := &holdGate{what: "consul PUT /v1/kv?cas", reached: make(chan struct{}), release: make(chan struct{})}
	type result struct {
		g   adapter.Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		gr, err := b.acquire(true)(locks.WithGate(ctx, g))
		done <- result{gr, err}
	}()
	select {
	case <-g.reached: // b read the record and is about to set it
	case got := <-done:
		t.Fatalf("b's TryLock ended before its compare-and-set: %v", got.err)
	}
	ga, err := a.acquire(true)(ctx)
	if err != nil {
		t.Fatalf("a's TryLock with both permits free: %v", err)
	}
	close(g.release)
	got := <-done
	if !errors.Is(got.err, locks.ErrLocked) {
		t.Fatalf("b's TryLock after losing the compare-and-set: %v; want a refusal", got.err)
	}
	t.Logf("b refused with one of %d permits free: %v", semLimit, got.err)
	gb, err := b.acquire(true)(ctx)
	if err != nil {
		t.Fatalf("b's next TryLock, a permit free: %v; want granted", err)
	}
	for _, r := range []func(context.Context) error{ga.Release, gb.Release} {
		if err := r(ctx); err != nil {
			t.Error(err)
		}
	}
}
