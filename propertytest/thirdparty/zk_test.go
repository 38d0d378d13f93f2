package thirdparty_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// zkTTL is the session timeout of every acquisition's connection, and the
// suite's TTL: zk.Lock's only lease is its session. minizk grants it with
// a tickTime of zkTTL/20 (sessions of 2 to 20 ticks). It is a minute of
// the run's manual clock so that go-zookeeper's own timers, which run on
// the wall clock (a read deadline of 2/3 of the session timeout on an
// idle connection without pings), never fire within a run.
const (
	zkTTL  = time.Minute
	zkTick = zkTTL / 20
)

// zkOptions are the suite's settings for zk.Lock on minizk in manual time.
// Settle: go-zookeeper's requests pass no locks.Gate (it has no hook), so
// the scheduler sees them only through quiescence; a few milliseconds let
// a request reach the server before an operation counts as blocked.
func zkOptions(claims ...propertytest.FaultKind) propertytest.Options {
	return propertytest.Options{TTL: zkTTL, Settle: 5 * time.Millisecond, Claims: claims}
}

// zkLock is the Factory of github.com/go-zookeeper/zk's Lock (v1.0.4,
// zk.NewLock) on minizk in manual time (zkfake.New with
// ZooKeeperManualTime and ForceMinizk). With fenced false the adapter hands
// out no token: zk.Lock used as it is.
//
// Mapping:
//   - One connection, so one session, per acquisition, with the suite's TTL
//     as its session timeout, and one zk.NewLock on it for the node
//     Prefix/name (zk.Lock creates it and its parents). zk.Lock has no lease
//     but its session: its node is ephemeral, and the server deletes it
//     once it has heard nothing from the session for the session timeout.
//     A crashed holder's session so expires one TTL after its last
//     request, and frees the lock, as a dead process's would. Like
//     go-zookeeper's documented use (defer conn.Close()), the adapter
//     closes the session once the acquisition is over: after Unlock, or a
//     failed attempt.
//   - Keep-alive: go-zookeeper pings every third of the session timeout of
//     wall time, which in manual time would renew sessions at moments
//     nothing in the run decides. The suite turns the watchdog off, so
//     the adapter turns go-zookeeper's pings off (fakes' ConnectManual
//     drops them) and keeps sessions alive on the run's clock instead: a waiter's
//     session with one request every TTL/3 while zk.Lock waits, as the
//     pings would (adapter.KeepAlive), and a holder's by Renew alone. An Advance longer than
//     the TTL jumps past a waiter's session expiry, as a pause of the
//     waiting process would: zk.Lock then returns zk.ErrSessionExpired,
//     an unknown outcome to the suite.
//   - Reconnects: go-zookeeper sleeps a second of wall time before it
//     dials its one server again; ConnectManual's client redials at once
//     twice first, so that a client whose session expired learns so, and
//     has a new session, without that wait.
//   - go-zookeeper's calls take no context: the only way to stop one is to
//     close its connection, which ends the session and deletes its node.
//     The adapter does so when a Lock's ctx ends (a waiter that gives up).
//     A Renew or Unlock whose ctx ends returns at once and leaves its
//     request to finish: a process that stops with a request out does not
//     close its session either, which then lives out its timeout.
//   - Lock is zk.Lock.Lock. TryLock: zk.Lock has none. The adapter calls
//     Lock and gives up as soon as it would wait, that is at its first
//     getData request (the watch on its predecessor), by closing the
//     session; then it returns locks.ErrLocked. Should Lock have returned
//     holding the lock meanwhile (its predecessor went just then), the
//     outcome is unknown (the session that held it is closed).
//   - Start: after Lock returned, one request on the session (exists of
//     the lock's node), sent at Start; the lock is granted only if the
//     connection still has the session it locked with. go-zookeeper goes
//     on with a new session after an expiry, silently to zk.Lock, which
//     then cannot tell that its node is gone: this check is what a user of
//     zk.Lock must make to know the lock still stands. Failing it is
//     locks.ErrNotHeld.
//   - Token (fenced only): zk.Lock keeps its node's path unexported. The
//     adapter lists the lock's children and reads the lowest one (zk.Lock
//     holds only when its node is the lowest; zkLowest); it must be owned by the
//     acquisition's session, and its czxid is the token, as zklock's.
//   - Renew is the same request and session check as Start's. Unlock is
//     zk.Lock.Unlock (a delete of its node, any version), then the
//     session's Close; zk.ErrNoNode and zk.ErrSessionExpired are
//     locks.ErrNotHeld.
func zkLock(fenced bool) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		z, err := zkfake.Start(zkfake.ManualTime(epoch), zkfake.ForceMinizk(), zkfake.TickTime(zkTick))
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the ZooKeeper fake", z)
		return zkBackend(z, fenced), nil
	}
}

// zkBackend is zkLock's Backend on z.
func zkBackend(z *zkfake.Server, fenced bool) *propertytest.Backend {
	return &propertytest.Backend{
		NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
			o, err := locks.Resolve(z.Prefix(), append(z.LockOptions(), opts...)...)
			if err != nil {
				return nil, err
			}
			if strings.Contains(name, "/") {
				return nil, fmt.Errorf("zk adapter: lock name %q: one node per lock, no slash", name)
			}
			c := &zkClient{z: z, path: zkPath(o, name), o: o, fenced: fenced}
			acquire := func(wait bool) func(context.Context) (adapter.Grant, error) {
				return func(ctx context.Context) (adapter.Grant, error) { return c.acquire(ctx, wait) }
			}
			return adapter.New(name, o, adapter.Lock{Lock: acquire(true), TryLock: acquire(false)})
		},
		Clock:   z.Clock(),
		Advance: z.Advance,
	}
}

// zkPath is the node of the lock called name: its contenders' parent.
func zkPath(o locks.Options, name string) string {
	return strings.TrimSuffix(o.Prefix, "/") + "/" + name
}

// zkClient is one client of zk.Lock: a connection per acquisition.
type zkClient struct {
	z      *zkfake.Server
	path   string
	o      locks.Options
	fenced bool
}

func (c *zkClient) acquire(ctx context.Context, wait bool) (adapter.Grant, error) {
	conn, waits, err := c.connect()
	if err != nil {
		return adapter.Grant{}, err
	}
	session := conn.SessionID()
	l := zk.NewLock(conn, c.path, zk.WorldACL(zk.PermAll))
	stop := func() time.Time { return time.Time{} }
	if wait {
		// An error shows in zk.Lock's own requests.
		stop = adapter.KeepAlive(c.o.Clock, c.o.TTL/3, time.Time{}, func() error { _, _, err := conn.Exists(c.path); return err })
		waits = nil
	}
	err = zkStop(ctx, conn, waits, l.Lock)
	stop()
	switch {
	case errors.Is(err, errZKWouldWait):
		return adapter.Grant{}, adapter.Locked("zk", err)
	case err != nil:
		conn.Close()
		return adapter.Grant{}, err
	}
	start := c.o.Clock.Now()
	ops := &zkLease{l: l, conn: conn, session: session, path: c.path}
	if err := ops.Renew(ctx); err != nil {
		conn.Close()
		return adapter.Grant{}, err
	}
	g := adapter.Grant{Start: start, Renew: ops.Renew, Release: ops.Release}
	if c.fenced {
		czxid, err := ops.czxid(ctx)
		if err != nil {
			conn.Close()
			return adapter.Grant{}, err
		}
		g.Token, g.Fenced = locks.Token(czxid), true
	}
	return g, nil
}

// connect returns a new connection with a session of the TTL (on
// ConnectManual: no pings, prompt redials), once it has the session;
// waits is closed at its first getData request: on a connection of its
// own, only zk.Lock's watch on its predecessor is one. It is closed at the
// end of the run at the latest (the fake's Close).
func (c *zkClient) connect() (*zk.Conn, <-chan struct{}, error) {
	waits := make(chan struct{})
	var once sync.Once
	conn, err := c.z.ConnectManual(c.z.Addr(), c.o.TTL, func(op int32) {
		if op == zkOpGetData {
			once.Do(func() { close(waits) })
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("zk adapter: %w", err)
	}
	if got, err := c.z.Minizk().SessionTimeout(conn.SessionID()); err != nil || got != c.o.TTL {
		conn.Close()
		return nil, nil, fmt.Errorf("zk adapter: session timeout %v (%v), want the TTL %v", got, err, c.o.TTL)
	}
	return conn, waits, nil
}

// zkOpGetData is the opcode of getData in ZooKeeper's wire protocol.
const zkOpGetData = 4

// errZKWouldWait is zkCall's error when the call was given up at the
// first sign that zk.Lock waits.
var errZKWouldWait = errors.New("zk.Lock would wait for its predecessor: its session closed")

// zkCall runs f, a call on conn, until it returns or ctx ends; if ctx ends
// first, f finishes in the background and zkCall returns ctx's error. A
// process that stops while a request is out does not close its session
// either: the session ends with its timeout.
func zkCall(ctx context.Context, f func() error) error {
	res := make(chan error, 1)
	go func() { res <- f() }()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return fmt.Errorf("zk adapter: %w", ctx.Err())
	}
}

// zkStop runs f, zk.Lock's Lock on conn, until it returns, ctx ends or
// waits is closed; in the last two cases it closes conn, the only way to
// stop a go-zookeeper call, and waits for f to return. A call that
// returned without an error all the same is an unknown outcome.
func zkStop(ctx context.Context, conn *zk.Conn, waits <-chan struct{}, f func() error) error {
	res := make(chan error, 1)
	go func() { res <- f() }()
	var why error
	select {
	case err := <-res:
		return err
	case <-waits:
		why = errZKWouldWait
	case <-ctx.Done():
		why = fmt.Errorf("zk adapter: %w: its session closed", ctx.Err())
	}
	conn.Close()
	if err := <-res; err == nil {
		return fmt.Errorf("zk adapter: the call succeeded as it was given up (%v); its session is closed", why)
	}
	return why
}

// zkLease is the renew and release of one acquisition.
type zkLease struct {
	l       *zk.Lock
	conn    *zk.Conn
	session int64
	path    string
}

// Renew proves the session alive with one request, and checks that the
// connection still has the session the lock was taken with.
func (z *zkLease) Renew(ctx context.Context) error {
	err := zkCall(ctx, func() error { _, _, err := z.conn.Exists(z.path); return err })
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		return adapter.NotHeld("zk", err)
	case err != nil:
		return err
	case z.conn.SessionID() != z.session:
		return adapter.NotHeld("zk", fmt.Errorf("the connection moved from session %#x to %#x", z.session, z.conn.SessionID()))
	}
	return nil
}

// Release is zk.Lock.Unlock, then the session's Close (after Unlock
// returned, in the background if ctx ended first).
func (z *zkLease) Release(ctx context.Context) error {
	err := zkCall(ctx, func() error {
		defer z.conn.Close()
		return z.l.Unlock()
	})
	if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrSessionExpired) {
		return adapter.NotHeld("zk", err)
	}
	return err
}

// czxid reads the czxid of the lock's lowest child, which must be the
// acquisition's session's.
func (z *zkLease) czxid(ctx context.Context) (int64, error) {
	var st *zk.Stat
	err := zkCall(ctx, func() error {
		kids, _, err := z.conn.Children(z.path)
		if err != nil {
			return err
		}
		lowest, ok := zkLowest(kids)
		if !ok {
			return zk.ErrNoNode
		}
		_, st, err = z.conn.Exists(z.path + "/" + lowest)
		if err == nil && st.EphemeralOwner != z.session {
			err = fmt.Errorf("lowest child %s is session %#x's, not %#x's: %w", lowest, st.EphemeralOwner, z.session, zk.ErrNoNode)
		}
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
		return 0, adapter.NotHeld("zk", err)
	case err != nil:
		return 0, err // st may still be written by a call given up on
	}
	return st.Czxid, nil
}

// zkLowest returns the child with the lowest sequence number, the digits
// after the last "lock-" of its name, as zk.Lock reads its queue: the
// holder's node.
func zkLowest(kids []string) (string, bool) {
	lowest, best := "", int64(-1)
	for _, k := range kids {
		i := strings.LastIndex(k, "lock-")
		if i < 0 {
			continue
		}
		seq, err := strconv.ParseInt(k[i+len("lock-"):], 10, 64)
		if err == nil && (best < 0 || seq < best) {
			lowest, best = k, seq
		}
	}
	return lowest, best >= 0
}

// zkChecks sets the default runs of a zk.Lock test: each run of about 30
// actions takes some 0.3 s of wall time (a connection and a session per
// acquisition), so 3 by default; LOCKPROOF_DEEP=1 or -rapid.checks decide
// otherwise.
func zkChecks(t *testing.T) {
	zkSkipUnderRace(t)
	suitemain.SetChecks(t, 3)
}

// zkSkipUnderRace skips a suite run of zk.Lock (and the token test, where
// CI saw the same race after the test had ended) under the race detector:
// go-zookeeper v1.0.4 races on Conn.lastZxid (its receive loop writes it,
// sendSetWatches reads it) when a connection that has watches reconnects,
// which a waiter's session expiring in a run makes it do. The detector
// then reports the library, not the adapter.
func zkSkipUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("go-zookeeper v1.0.4 races on Conn.lastZxid when a connection with watches reconnects")
	}
}

// go-zookeeper's zk.Lock claims mutual exclusion while its session lives,
// with no fencing token: run with Claims crash only, the suite must pass.
func TestThirdPartyZKLock(t *testing.T) {
	zkChecks(t)
	ownClaims(t, 0x2c10c, zkLock(false), zkOptions(propertytest.FaultCrash))
}

// With its node's czxid as a token, read by the adapter, zk.Lock is safe
// under pauses too: the suite must pass.
func TestThirdPartyZKLockFenced(t *testing.T) {
	zkChecks(t)
	ownClaims(t, 0x2c10c, zkLock(true), zkOptions(propertytest.FaultCrash, propertytest.FaultPause))
}

// Held to pause safety without a token, zk.Lock must be caught losing an
// update of a paused holder: its session expired, the next waiter was
// granted, and the holder wrote late. The default seed, 181068, fails in
// its first run; shrinking is cut short by default (each shrink step is a
// run of about 0.4 s) and runs its full 2 s under LOCKPROOF_DEEP=1.
func TestThirdPartyZKLockClaimingPause(t *testing.T) {
	zkSkipUnderRace(t)
	suitemain.SetChecks(t, 200) // stops at the first failure
	if !suitemain.Deep() {
		suitemain.SetFlag(t, "rapid.shrinktime", "1ms")
	}
	strongerClaim(t, 181068, zkLock(false), zkOptions(propertytest.FaultCrash, propertytest.FaultPause), propertytest.Exclusivity)
}

// The adapter's token is the czxid of the holder's node, as the server has
// it, and grows from one acquisition to the next; a TryLock on the held
// lock is refused and leaves no node behind.
func TestThirdPartyZKTokenIsCzxid(t *testing.T) {
	zkSkipUnderRace(t)
	z := zkfake.New(t, zkfake.ManualTime(epoch), zkfake.ForceMinizk(), zkfake.TickTime(zkTick))
	be := zkBackend(z, true)
	opts := []locks.Option{locks.WithTTL(zkTTL), locks.WithWatchdog(false)}
	a, err := be.NewLocker("token", opts...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := be.NewLocker("token", opts...)
	if err != nil {
		t.Fatal(err)
	}
	o, err := locks.Resolve(z.Prefix(), append(z.LockOptions(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	path := zkPath(o, "token")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last locks.Token
	for i := range 2 {
		lease, err := a.TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock %d: %v", i, err)
		}
		tok, ok := lease.Token()
		kids, err := z.Minizk().Children(path)
		if err != nil || len(kids) != 1 {
			t.Fatalf("acquisition %d: children %v (%v), want the holder's alone", i, kids, err)
		}
		_, st, err := z.Minizk().Get(path + "/" + kids[0])
		if err != nil || !ok || locks.Token(st.Czxid) != tok || tok <= last {
			t.Fatalf("acquisition %d: token %v (ok %v) after %v; the holder's node has czxid %d (%v)", i, tok, ok, last, st.Czxid, err)
		}
		if _, err := b.TryLock(ctx); !errors.Is(err, locks.ErrLocked) {
			t.Fatalf("TryLock on the held lock: %v, want locks.ErrLocked", err)
		}
		if kids, err := z.Minizk().Children(path); err != nil || len(kids) != 1 {
			t.Fatalf("after a refused TryLock: children %v (%v), want the holder's alone", kids, err)
		}
		last = tok
		if err := lease.Unlock(ctx); err != nil {
			t.Fatalf("Unlock %d: %v", i, err)
		}
	}
}
