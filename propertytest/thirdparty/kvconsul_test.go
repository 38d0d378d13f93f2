package thirdparty_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	kvconsul "github.com/kvtools/consul"
	"github.com/kvtools/valkeyrie/store"
	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// kvConsulTTL is the suite's TTL for kvtools/consul: the TTL of the
// Consul session its Locker creates, Consul's shortest (session_ttl_min).
// kvtools asks for half the TTL it is given ("Consul multiplies the TTL
// by 2x"), so its Locker is made with twice this.
const kvConsulTTL = 10 * time.Second

// kvConsulOptions are the suite's settings for kvtools/consul on
// miniconsul in manual time, with sessions that end exactly at their TTL
// (consulfake.SessionTTLMultiplier(1)). Slack covers the Locker's 1 ms
// lock-delay and the deadlock-freedom probe's steps; OpTimeout is short in
// wall time, for every request is in memory and api.Lock sleeps 5 s of wall
// time when it meets a lock-delay.
func kvConsulOptions() propertytest.Options {
	return propertytest.Options{
		TTL:            kvConsulTTL,
		Slack:          kvConsulTTL / 2,
		Settle:         30 * time.Millisecond,
		OpTimeout:      100 * time.Millisecond,
		CheckTimeLimit: 3 * time.Second,
		Claims:         []propertytest.FaultKind{propertytest.FaultCrash},
	}
}

// kvRouter is the http.RoundTripper the tests install as
// http.DefaultClient's: kvtools/consul builds its api.Client on
// http.DefaultClient and offers no way to give it another, so each
// client's Store is given an address of its own (kvN.consul.invalid) and
// the router sends its requests through that client's transport, dialed in
// memory through its fakes.Conns. A request for a host of the router's
// that is gone (a renewer outliving its run) fails without leaving the
// process; requests for any other host go to http.DefaultTransport, as
// before.
type kvRouter struct {
	mu    sync.Mutex
	n     int
	hosts map[string]http.RoundTripper
}

var kvRoutes = &kvRouter{hosts: map[string]http.RoundTripper{}}

// kvHostSuffix ends every host the router hands out.
const kvHostSuffix = ".consul.invalid:8500"

// errKVGone is the error of a request for a host whose client is gone.
var errKVGone = errors.New("kvtools/consul test client gone (never dialed)")

// kvInstall puts kvRoutes in http.DefaultClient once, before the first
// Store exists (no request is then in flight).
var kvInstall sync.Once

// add routes a new host to rt and returns the host; remove is its undo.
func (r *kvRouter) add(rt http.RoundTripper) (host string, remove func()) {
	kvInstall.Do(func() { http.DefaultClient.Transport = kvRoutes })
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	host = fmt.Sprintf("kv%d%s", r.n, kvHostSuffix)
	r.hosts[host] = rt
	return host, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.hosts, host)
	}
}

func (r *kvRouter) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	rt := r.hosts[req.URL.Host]
	r.mu.Unlock()
	switch {
	case rt == nil && strings.HasSuffix(req.URL.Host, kvHostSuffix):
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, fmt.Errorf("%s: %w", req.URL.Host, errKVGone)
	case rt == nil:
		return http.DefaultTransport.RoundTrip(req)
	}
	return rt.RoundTrip(req)
}

// kvCall gives the requests api.Lock sends while a call of the adapter
// runs (it sends them without a context) the call's context, so that the
// suite's Gate sees them; the renewer's and the monitor's requests
// (session renew and destroy, consistent reads) keep their own. With
// keepGoing, they get the call's values without its cancellation: a
// request goes on when the call's context ends, as kvtools' own do.
type kvCall struct {
	base      http.RoundTripper
	call      atomic.Pointer[context.Context]
	keepGoing bool
	// answered, if set, is called when a read of the key is answered,
	// before api.Lock sees the reply.
	answered atomic.Pointer[func()]
}

func (c *kvCall) RoundTrip(r *http.Request) (*http.Response, error) {
	p := r.URL.Path
	own := r.URL.Query().Has("consistent") || strings.HasPrefix(p, "/v1/session/renew") || strings.HasPrefix(p, "/v1/session/destroy")
	if ctx := c.call.Load(); ctx != nil && !own {
		if c.keepGoing {
			r = r.WithContext(context.WithoutCancel(*ctx))
		} else {
			r = r.WithContext(*ctx)
		}
	}
	resp, err := c.base.RoundTrip(r)
	if f := c.answered.Load(); f != nil && err == nil && r.Method == http.MethodGet && strings.HasPrefix(p, "/v1/kv/") {
		(*f)()
	}
	return resp, err
}

// during runs f with ctx as the call's context.
func (c *kvCall) during(ctx context.Context, f func()) {
	c.call.Store(&ctx)
	defer c.call.Store(nil)
	f()
}

// kvClient is one client of kvtools/consul: its Store, and what routes its
// requests.
type kvClient struct {
	st    *kvconsul.Store
	calls *kvCall
	conns *fakes.Conns
	key   string
	ttl   time.Duration // the suite's: the session's TTL
	// naive takes what Lock returns as the library's documentation says:
	// a nil error is the lock.
	naive bool

	mu       sync.Mutex
	renewers map[chan struct{}]bool // the RenewLock channels not yet closed
}

// unlock calls lk.Unlock, which closes its renewer's channel stop.
func (c *kvClient) unlock(ctx context.Context, lk store.Locker, stop chan struct{}) error {
	c.mu.Lock()
	delete(c.renewers, stop)
	c.mu.Unlock()
	return lk.Unlock(ctx)
}

// crash ends what the client started, as its process's death would: its
// connections are severed, then its renewers told to stop (each tries to
// destroy its session once more through the severed connections, fails,
// and gives up within kvtools' MaxSessionDestroyAttempts). Without it,
// every lock a crashed client held would leave a renewer retrying for
// ever, thousands over a long run of the suite.
func (c *kvClient) crash() {
	c.conns.Sever()
	c.mu.Lock()
	defer c.mu.Unlock()
	for stop := range c.renewers {
		close(stop)
	}
	c.renewers = nil
}

// kvConsulLock is the Factory of kvtools/consul v1.0.2's store.Locker on
// miniconsul in manual time, with sessions ending exactly at their TTL.
//
// Mapping (a careful caller of the library):
//   - One Store per client (kvconsul.New with the client's own address,
//     routed in memory by kvRouter), one Locker per acquisition:
//     Store.NewLock(ctx, key, TTL twice the suite's, RenewLock set) creates
//     the Consul session (TTL the suite's, lock-delay 1 ms, behaviour
//     release) and starts kvtools' renewer, a goroutine that renews the
//     session every TTL/2 of wall time until Unlock. NewLock is given the
//     call's context without its cancellation: kvtools keeps that context
//     for the session's renewals and its destruction at Unlock, which must
//     outlive the call.
//   - Lock is Locker.Lock(ctx). A careful caller takes a nil lost-lock
//     channel for no lock (a granted api.Lock always returns one), whatever
//     the error says, and calls Unlock to stop the renewer; kvtools/consul
//     returns (nil, nil) when ctx ends while it waits (see
//     TestThirdPartyKVConsulNilLock). api.Lock sends its requests with no
//     context; while the call runs they carry the call's (kvCall), so the
//     suite's Gate sees them and a crash or the kit's give-up cuts a
//     blocking query, as a dead process's connections are closed.
//   - TryLock: the kit's, from Lock (Lock.WouldWait): given up before the
//     first blocking query (consulBlocking), which api.Lock sends only to
//     wait for a holder. The library has no single attempt.
//   - Deadline: the kit's, from the start of the call, before the session
//     is created: Consul invalidates a session no earlier than its TTL
//     after its creation or a renewal. kvtools' renewals run on the wall
//     clock, so the Deadline never counts them; a renewal only keeps the
//     key longer than the holder believes, which is safe.
//   - No Renew: store.Locker has none (noRenew).
//   - Unlock is Locker.Unlock: it stops the renewer (which destroys the
//     session in the background) and releases the key; api.ErrLockNotHeld
//     is locks.ErrNotHeld.
//   - Lost: the lost-lock channel (api.Lock's monitor closes it when the
//     session is invalidated).
//   - Crash: the client's connections are severed and its renewers told
//     to stop (adapter.WithCrash, kvClient.crash), so that they renew
//     nothing more and end.
//
// Why sessions end at exactly their TTL: Consul promises only that a
// session lives until its TTL after the last renewal (a real server ends
// it somewhere before twice that); the Deadline must hold on the
// strictest server. On miniconsul's default (twice the TTL) a Deadline
// reckoned on kvtools' own TTL, twice the session's, would pass unseen.
func kvConsulLock(naive bool) propertytest.Factory {
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
				c, err := newKVClient(env, s, o.Prefix+name, o.TTL, naive)
				if err != nil {
					return nil, err
				}
				l := adapter.Lock{Lock: c.lock, WouldWait: consulBlocking}
				if naive {
					l = adapter.Lock{Lock: c.lock, TryLock: c.tryLock}
				}
				lk, err := adapter.New(name, o, l)
				if err != nil {
					return nil, err
				}
				return adapter.WithCrash(lk, c.crash), nil
			},
			Clock:     s.Clock(),
			Advance:   s.Advance,
			InProcess: true,
		}, nil
	}
}

// newKVClient makes one client's Store, its requests routed in memory
// through a Conns of its own.
func newKVClient(env propertytest.Env, s *consulfake.Server, key string, ttl time.Duration, naive bool) (*kvClient, error) {
	conns := fakes.NewConns()
	tr := &http.Transport{DialContext: conns.Dial(s.DialContext)}
	calls := &kvCall{base: consulfake.GateTransport(tr), keepGoing: naive}
	host, remove := kvRoutes.add(calls)
	st, err := kvconsul.New(context.Background(), []string{host}, nil)
	if err != nil {
		remove()
		return nil, err
	}
	c := &kvClient{st: st, calls: calls, conns: conns, key: key, ttl: ttl, naive: naive}
	env.Cleanup(func() {
		c.crash()
		remove()
		tr.CloseIdleConnections()
	})
	return c, nil
}

// lock makes a Locker (and its session) and waits for it.
func (c *kvClient) lock(ctx context.Context) (adapter.Grant, error) {
	var g adapter.Grant
	var err error
	c.calls.during(ctx, func() { g, err = c.acquire(ctx) })
	return g, err
}

// tryLock is the naive caller's single attempt: Lock with a context that
// ends as soon as its first read of the key is answered (a short
// deadline), its requests going on as kvtools' do.
func (c *kvClient) tryLock(ctx context.Context) (adapter.Grant, error) {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := func() { cancel() }
	c.calls.answered.Store(&f)
	defer c.calls.answered.Store(nil)
	var g adapter.Grant
	var err error
	c.calls.during(tctx, func() { g, err = c.acquire(tctx) })
	if err != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) {
		err = adapter.Locked("kvtools/consul", err)
	}
	return g, err
}

func (c *kvClient) acquire(ctx context.Context) (adapter.Grant, error) {
	stop := make(chan struct{})
	c.mu.Lock()
	if c.renewers == nil {
		c.renewers = map[chan struct{}]bool{}
	}
	c.renewers[stop] = true
	c.mu.Unlock()
	lk, err := c.st.NewLock(context.WithoutCancel(ctx), c.key, &store.LockOptions{TTL: 2 * c.ttl, RenewLock: stop})
	if err != nil {
		c.mu.Lock()
		delete(c.renewers, stop) // no renewer was started
		c.mu.Unlock()
		return adapter.Grant{}, fmt.Errorf("kvtools/consul: new lock: %w", err)
	}
	lost, err := lk.Lock(ctx)
	switch {
	case err != nil:
		_ = c.unlock(context.WithoutCancel(ctx), lk, stop) // stops the renewer
		return adapter.Grant{}, fmt.Errorf("kvtools/consul: lock: %w", err)
	case lost == nil && !c.naive:
		_ = c.unlock(context.WithoutCancel(ctx), lk, stop)
		return adapter.Grant{}, fmt.Errorf("kvtools/consul: Lock returned no lock and no error (%w)", errNoLock(ctx))
	}
	return adapter.Grant{Lost: lost, Renew: noRenew("kvtools/consul's store.Locker"), Release: func(rctx context.Context) error {
		var err error
		c.calls.during(rctx, func() { err = c.unlock(rctx, lk, stop) })
		if errors.Is(err, api.ErrLockNotHeld) {
			return adapter.NotHeld("kvtools/consul", err)
		}
		return err
	}}, nil
}

// noRenew is the Renew of a library that has none: an error wrapping
// errors.ErrUnsupported, which the suite counts as an unknown outcome. The
// kit's own answer for a nil Grant.Renew, adapter.ErrNoRenew, does not
// wrap it, and the suite then counts every Renew as a failure of the lock
// (progress).
func noRenew(lib string) func(context.Context) error {
	return func(context.Context) error {
		return fmt.Errorf("%s has no renewal: %w", lib, errors.ErrUnsupported)
	}
}

// errNoLock is why a careful caller's Lock got no lock: its context's end,
// or nothing known.
func errNoLock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("context not ended")
}

// kvtools/consul's Locker, used with care, claims mutual exclusion while
// its session lives, with no fencing token: run with Claims crash only,
// the suite must pass.
func TestThirdPartyKVConsul(t *testing.T) {
	suitemain.SetChecks(t, 6)
	rep := ownClaims(t, 0x4bc0, kvConsulLock(false), kvConsulOptions())
	t.Logf("outcomes %v; spurious refusals %d", rep.Outcomes, rep.SpuriousRefusals)
}

// Taken at its word (a nil error is the lock, as valkeyrie's store.Locker
// documents), kvtools/consul's Lock grants a caller whose context ended
// while another client held the lock: the suite must report exclusivity.
// The caller here tries with a short deadline, the way to try a lock that
// has no single attempt: its context ends once its first read of the key
// is answered (the requests go on, as kvtools sends them without a
// context).
func TestThirdPartyKVConsulNilLockCaught(t *testing.T) {
	suitemain.SetChecks(t, 100) // stops at the first failure
	strongerClaim(t, 0x4bc0, kvConsulLock(true), kvConsulOptions(), propertytest.Exclusivity)
}

// kvtools/consul v1.0.2's Lock returns (nil, nil) when its context ends
// while another client holds the lock: a nil error, which the caller takes
// for the lock, and a nil lost-lock channel, which never closes. Its
// api.Lock checks the stop channel (ctx.Done()) only between its reads of
// the key; a read that finds the key still held (here the blocking query
// ends at its wait time, 15 s) sees the channel closed and returns nothing
// at all. Once the holder lets go, a third client is granted the lock too,
// and two clients believe they hold it.
func TestThirdPartyKVConsulNilLock(t *testing.T) {
	s := consulfake.New(t, consulfake.ManualTime(epoch), consulfake.ForceMiniconsul(), consulfake.SessionTTLMultiplier(1))
	ctx := context.Background()
	const ttl = time.Minute // sessions of 30 s, alive across the 15 s wait
	newLocker := func() store.Locker {
		c, err := newKVClient(t, s, s.Prefix()+"nil-lock", ttl/2, true)
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.st.NewLock(ctx, c.key, &store.LockOptions{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b, c := newLocker(), newLocker(), newLocker()
	if lost, err := a.Lock(ctx); err != nil || lost == nil {
		t.Fatalf("a's Lock of a free lock: (%v, %v)", lost, err)
	}

	// b waits for a; its context ends while it waits.
	bctx, cancel := context.WithCancel(ctx)
	type result struct {
		lost <-chan struct{}
		err  error
	}
	done := make(chan result, 1)
	go func() {
		lost, err := b.Lock(bctx)
		done <- result{lost, err}
	}()
	// a's lock monitor parks a blocking query too: waiting for one let the
	// clock move before b's was parked, and b then waited for ever.
	s.WaitBlocked(2) // a's monitor and b's Lock
	cancel()
	s.Advance(api.DefaultLockWaitTime) // the query ends, a still holding
	got := <-done
	if got.err != nil || got.lost != nil {
		t.Fatalf("b's Lock, its context ended while a held the lock: (%v, %v); want kvtools' (nil, nil)", got.lost, got.err)
	}
	// b, told nothing went wrong, goes on as holder; a lets go, and c is
	// granted too.
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if lost, err := c.Lock(ctx); err != nil || lost == nil {
		t.Fatalf("c's Lock: (%v, %v); want granted", lost, err)
	}
	t.Log("kvtools/consul: Lock returned (nil, nil) after its context ended, and the lock went to another client")
	_ = c.Unlock(ctx)
}
