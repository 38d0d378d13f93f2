package thirdparty_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/kvtools/valkeyrie/store"
	kvzk "github.com/kvtools/zookeeper"
	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/minizk"
	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// kvZKTTL is the suite's TTL for kvtools/zookeeper, and the
// ConnectionTimeout of every Store, which the library also asks as its
// session timeout: the lock's only lease is its session. A minute of the
// run's manual clock, so that go-zookeeper's wall-time pings (every third
// of it) never run within a run; minizk grants it with a tickTime of a
// twentieth.
const kvZKTTL = time.Minute

// The opcodes of ZooKeeper's wire protocol that the relay looks for.
const (
	kvZKOpGetData = 4
	kvZKOpSetData = 5
)

// kvZKLock is the Factory of the valkeyrie store.Locker of
// github.com/kvtools/zookeeper (v1.0.2) on minizk in manual time.
//
// What the library does (zookeeper.go): New dials with zk.Connect(endpoints,
// ConnectionTimeout), which is also the session timeout, with no dialer
// or other hook. NewLock(ctx, key, opts) is a zk.Lock on the node key
// (opts.TTL and RenewLock are ignored). Lock(ctx) ignores ctx while it
// waits: it is zk.Lock.Lock (an ephemeral sequential child of key, a
// watch on its predecessor), then a setData of opts.Value on key, then a
// goroutine that watches key's data and closes the returned channel
// ("lost") on a change of it, on its session's end, or when ctx ends.
// Unlock is zk.Lock.Unlock (its child deleted). No renewal but the
// session's pings, no fencing token.
//
// Mapping:
//   - Each client's Stores dial a relay of the adapter's on a loopback
//     port (kvZKRelay), which forwards to minizk in memory through the
//     client's fakes.Conns and reads each request's opcode. So the
//     clients are on TCP (InProcess false, a Settle), and a crash can
//     sever them as a dead process's connections end. A Store is given
//     the relay's address three times, as an ensemble's three servers:
//     go-zookeeper then redials at once after a lost connection (an
//     expired session), where with one address it waits a second of
//     wall time first.
//   - One Store, so one session, per acquisition, closed once it is over
//     (after Unlock or a failed attempt), as a user of one Store per lock
//     defers its Close.
//   - Lock is the library's Lock, given a context that ends at Release:
//     the library's watch goroutine runs on it. The library cannot be
//     stopped but by closing its Store (which ends the session and so
//     its child): the adapter does so when the suite's ctx ends. While it
//     waits, the adapter keeps the session alive on the run's clock, one
//     exists request every TTL/3 (adapter.KeepAlive), as go-zookeeper's
//     pings would in wall time.
//   - TryLock: the library has none. The adapter runs its Lock and gives
//     up at the first sign of a wait: a getData on the Store's
//     connection before any setData (before the grant's setData only
//     zk.Lock's watch on its predecessor is one), by closing the Store;
//     that is locks.ErrLocked. A Lock that granted all the same is an
//     unknown outcome (its session is closed).
//   - Start: before the Store is made (the session's creation), or the
//     start of the last keep-alive that succeeded: the server expires the
//     session no sooner than a TTL after it. Grant.Lost is the library's
//     lost channel. No Renew: the library has none (its pings run in wall
//     time, which never reaches them in a run).
//   - Unlock is the library's Unlock; zk.ErrNoNode, ErrNotLocked and
//     ErrSessionExpired are locks.ErrNotHeld.
//   - Crash severs the client's connections (its sessions live out their
//     timeout on the run's clock, as a dead process's) and then closes
//     its Stores in the background (go-zookeeper then waits up to a
//     second of wall time for the closeSession it cannot send).
func kvZKLock(t testing.TB) propertytest.Factory {
	closing := &sync.WaitGroup{}
	t.Cleanup(closing.Wait)
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		z, err := zkfake.Start(zkfake.ManualTime(epoch), zkfake.ForceMinizk(), zkfake.TickTime(kvZKTTL/20))
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the ZooKeeper fake", z)
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				o, err := locks.Resolve(z.Prefix(), append(z.LockOptions(), opts...)...)
				if err != nil {
					return nil, err
				}
				tick := z.Minizk().TickTime()
				if o.TTL < 2*tick || o.TTL > 20*tick {
					return nil, fmt.Errorf("kvtools/zookeeper adapter: TTL %v: minizk grants sessions of %v to %v only", o.TTL, 2*tick, 20*tick)
				}
				if strings.Contains(name, "/") {
					return nil, fmt.Errorf("kvtools/zookeeper adapter: lock name %q: one node per lock, no slash", name)
				}
				c := &kvZKClient{z: z, key: zkPath(o, name), o: o, conns: fakes.NewConns(), open: map[*kvZKSession]bool{}, closing: closing}
				env.Cleanup(c.closeAll)
				l, err := adapter.New(name, o, adapter.Lock{
					Lock:    func(ctx context.Context) (adapter.Grant, error) { return c.acquire(ctx, false) },
					TryLock: func(ctx context.Context) (adapter.Grant, error) { return c.acquire(ctx, true) },
				})
				if err != nil {
					return nil, err
				}
				return adapter.WithCrash(l, c.crash), nil
			},
			Clock:   z.Clock(),
			Advance: z.Advance,
		}, nil
	}
}

// kvZKClient is one client of the lock: its connections, and the sessions
// (Stores) it has open.
type kvZKClient struct {
	z     *zkfake.Server
	key   string
	o     locks.Options
	conns *fakes.Conns

	mu   sync.Mutex
	open map[*kvZKSession]bool
	// closing counts the Stores closed in the background (after a crash
	// or a failed Lock: go-zookeeper then waits a second of wall time for
	// the reply to its closeSession), the test's, which waits for them
	// at its end so that they overlap the next runs.
	closing *sync.WaitGroup
}

// kvZKSession is one acquisition's Store, behind a relay of its own.
type kvZKSession struct {
	st    store.Store
	relay *kvZKRelay
	waits chan struct{} // closed at a getData sent before any setData
	once  sync.Once
}

// close closes the Store (its session, when the relay still reaches the
// server), then the relay. Later calls do nothing.
func (s *kvZKSession) close() {
	s.once.Do(func() {
		_ = s.st.Close()
		s.relay.Close()
	})
}

// session makes a new Store on a relay of its own.
func (c *kvZKClient) session() (*kvZKSession, error) {
	s := &kvZKSession{waits: make(chan struct{})}
	var set atomic.Bool
	var waits sync.Once
	relay, err := startKVZKRelay(c.conns.Dial(c.z.DialContext), func(op int32) bool {
		switch {
		case op == kvZKOpSetData:
			set.Store(true)
		case op == kvZKOpGetData && !set.Load():
			waits.Do(func() { close(s.waits) })
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	s.relay = relay
	c.mu.Lock()
	c.open[s] = true
	c.mu.Unlock()
	// The relay's address three times, as an ensemble's three servers
	// are given: go-zookeeper redials another at once after a connection
	// is lost, and waits a second of wall time only once it tried all.
	addrs := []string{relay.Addr(), relay.Addr(), relay.Addr()}
	st, err := kvzk.New(context.Background(), addrs, &kvzk.Config{ConnectionTimeout: c.o.TTL})
	if err != nil {
		relay.Close()
		c.forget(s)
		return nil, fmt.Errorf("kvtools/zookeeper adapter: New: %w", err)
	}
	s.st = st
	return s, nil
}

// end closes s and forgets it.
func (c *kvZKClient) end(s *kvZKSession) {
	s.close()
	c.forget(s)
}

func (c *kvZKClient) forget(s *kvZKSession) {
	c.mu.Lock()
	delete(c.open, s)
	c.mu.Unlock()
}

// endLater closes s in the background and forgets it; closeAll waits
// for it.
func (c *kvZKClient) endLater(s *kvZKSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLater(s)
}

// closeLater closes s in the background; c.mu is held.
func (c *kvZKClient) closeLater(s *kvZKSession) {
	delete(c.open, s)
	c.closing.Add(1)
	go func() {
		defer c.closing.Done()
		s.close()
	}()
}

// crash severs the client's connections, then closes its Stores in the
// background: their closeSession never reaches the server.
func (c *kvZKClient) crash() {
	c.conns.Sever()
	c.mu.Lock()
	defer c.mu.Unlock()
	for s := range c.open {
		c.closeLater(s)
	}
}

// closeAll closes what the client left open, at the end of the run.
func (c *kvZKClient) closeAll() {
	c.mu.Lock()
	open := c.open
	c.open = map[*kvZKSession]bool{}
	c.mu.Unlock()
	for s := range open {
		s.close()
	}
}

// errKVZKWouldWait is why a TryLock gave up: the library's Lock would
// wait for its predecessor.
var errKVZKWouldWait = errors.New("the library's Lock would wait for its predecessor: its Store closed")

// acquire makes one acquisition on a Store of its own: the library's
// Lock, given up at its first wait when try.
func (c *kvZKClient) acquire(ctx context.Context, try bool) (adapter.Grant, error) {
	start := c.o.Clock.Now()
	s, err := c.session()
	if err != nil {
		return adapter.Grant{}, err
	}
	hold, endHold := context.WithCancel(context.Background())
	lk, err := s.st.NewLock(ctx, c.key, &store.LockOptions{TTL: c.o.TTL})
	if err != nil {
		endHold()
		c.end(s)
		return adapter.Grant{}, fmt.Errorf("kvtools/zookeeper adapter: NewLock: %w", err)
	}
	var waits <-chan struct{}
	stop := func() time.Time { return start }
	if try {
		waits = s.waits
	} else {
		stop = adapter.KeepAlive(c.o.Clock, c.o.TTL/3, start, func() error {
			_, err := s.st.Exists(context.Background(), c.key, nil)
			return err
		})
	}
	type result struct {
		lost <-chan struct{}
		err  error
	}
	res := make(chan result, 1)
	go func() {
		lost, err := lk.Lock(hold)
		res <- result{lost, err}
	}()
	var r result
	var why error
	select {
	case r = <-res:
	case <-waits:
		why = errKVZKWouldWait
	case <-ctx.Done():
		why = fmt.Errorf("kvtools/zookeeper adapter: %w: its Store closed", ctx.Err())
	}
	if why != nil {
		c.end(s) // the only way to stop the library's Lock
		r = <-res
	}
	since := stop()
	switch {
	case why != nil && r.err == nil:
		endHold()
		return adapter.Grant{}, fmt.Errorf("kvtools/zookeeper adapter: Lock granted as it was given up (%v); its Store is closed", why)
	case errors.Is(why, errKVZKWouldWait):
		endHold()
		return adapter.Grant{}, adapter.Locked("kvtools/zookeeper", why)
	case why != nil:
		endHold()
		return adapter.Grant{}, why
	case r.err != nil:
		// The library may hold the lock (a failed setData after the
		// grant): closing the Store ends its session and so its child.
		// In the background: after an expired session go-zookeeper waits
		// a second of wall time for the reply to its closeSession.
		endHold()
		c.endLater(s)
		return adapter.Grant{}, r.err
	}
	return adapter.Grant{
		Start: since,
		Lost:  r.lost,
		Release: func(ctx context.Context) error {
			err := zkCall(ctx, func() error {
				defer func() {
					endHold()
					c.end(s)
				}()
				return lk.Unlock(context.Background())
			})
			if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNotLocked) || errors.Is(err, zk.ErrSessionExpired) {
				return adapter.NotHeld("kvtools/zookeeper", err)
			}
			return err
		},
	}, nil
}

// kvZKRelay is a loopback TCP listener whose every connection is
// forwarded to the server through dial, frame by frame from the client,
// onRequest told each request's opcode (not the handshake's) before it
// is forwarded; when it returns false, the connection is closed instead.
type kvZKRelay struct {
	ln        net.Listener
	dial      fakes.DialFunc
	onRequest func(op int32) bool

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

// startKVZKRelay starts a relay on a loopback port chosen by the kernel.
func startKVZKRelay(dial fakes.DialFunc, onRequest func(op int32) bool) (*kvZKRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("kvtools/zookeeper adapter: relay: %w", err)
	}
	r := &kvZKRelay{ln: ln, dial: dial, onRequest: onRequest}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the relay's host:port.
func (r *kvZKRelay) Addr() string { return r.ln.Addr().String() }

func (r *kvZKRelay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		s, err := r.dial(context.Background(), "tcp", "")
		if err != nil { // severed: the dial fails as a dead process's would
			_ = c.Close()
			continue
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			_, _ = c.Close(), s.Close()
			return
		}
		r.conns = append(r.conns, c, s)
		r.wg.Add(2)
		r.mu.Unlock()
		go func() {
			defer r.wg.Done()
			_, _ = io.Copy(c, s)
			_, _ = c.Close(), s.Close()
		}()
		go func() {
			defer r.wg.Done()
			r.forward(c, s)
			_, _ = c.Close(), s.Close()
		}()
	}
}

// forward copies c's frames to s, reporting each request's opcode.
func (r *kvZKRelay) forward(c, s net.Conn) {
	in := bufio.NewReader(c)
	for first := true; ; first = false {
		var size [4]byte
		if _, err := io.ReadFull(in, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > 1<<21 {
			return
		}
		frame := make([]byte, 4+n)
		copy(frame, size[:])
		if _, err := io.ReadFull(in, frame[4:]); err != nil {
			return
		}
		if !first && n >= 8 && !r.onRequest(int32(binary.BigEndian.Uint32(frame[8:12]))) {
			return
		}
		if _, err := s.Write(frame); err != nil {
			return
		}
	}
}

// Close stops the relay and its connections, and waits for its
// goroutines.
func (r *kvZKRelay) Close() {
	_ = r.ln.Close()
	r.mu.Lock()
	r.closed = true
	conns := r.conns
	r.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	r.wg.Wait()
}

// kvZKOptions are the suite's options for kvtools/zookeeper: its own
// claim (crash safety; no fencing token), its TTL, and a Settle for
// clients on loopback TCP.
func kvZKOptions() propertytest.Options {
	return propertytest.Options{
		Claims: []propertytest.FaultKind{propertytest.FaultCrash},
		TTL:    kvZKTTL,
		Settle: 5 * time.Millisecond,
	}
}

// kvtools/zookeeper claims mutual exclusion while its session lives, with
// no fencing token: with Claims crash only, the suite must pass. Its
// clients reach minizk over loopback TCP: 4 runs by default, the suite's
// 500 under LOCKPROOF_DEEP=1.
func TestThirdPartyKvtoolsZooKeeper(t *testing.T) {
	zkSkipUnderRace(t)
	suitemain.SetChecks(t, 4)
	ownClaims(t, 0x2c2f, kvZKLock(t), kvZKOptions())
}

// kvtools/zookeeper's Lock returns the error of its setData on the lock's
// node while zk.Lock holds the lock: a caller that takes the error for a
// refusal keeps everyone else out for as long as its Store lives. Shown
// with the setData's connection dropped (the client reconnects within
// its session): Lock fails, a second client then queues behind it, and
// only the first one's Unlock, which succeeds, lets it in.
func TestKvtoolsZooKeeperFailedLockHolds(t *testing.T) {
	zkSkipUnderRace(t)
	z := zkfake.New(t, zkfake.ManualTime(epoch), zkfake.ForceMinizk(), zkfake.TickTime(kvZKTTL/20))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var drop atomic.Bool
	drop.Store(true)
	relay, err := startKVZKRelay(z.DialContext, func(op int32) bool {
		return op != kvZKOpSetData || !drop.CompareAndSwap(true, false)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	cfg := &kvzk.Config{ConnectionTimeout: kvZKTTL}
	a, err := kvzk.New(ctx, []string{relay.Addr(), relay.Addr(), relay.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	key := z.Prefix() + "/failed"
	la, err := a.NewLock(ctx, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := la.Lock(ctx); err == nil {
		t.Fatal("A's Lock succeeded: its setData was not dropped")
	} else {
		t.Logf("A's Lock failed: %v", err)
	}
	kids, err := z.Minizk().Children(key)
	if err != nil || len(kids) != 1 {
		t.Fatalf("after A's failed Lock: children %v (%v), want A's node alone", kids, err)
	}
	held := key + "/" + kids[0]

	b, err := kvzk.New(ctx, []string{z.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lb, err := b.NewLock(ctx, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan error, 1)
	go func() {
		_, err := lb.Lock(ctx)
		granted <- err
	}()
	// B waits: a watch on A's node, which A's failed Lock left.
	if err := z.Minizk().WaitFor(ctx, func(v minizk.View) bool { d, _ := v.Watches(held); return d > 0 }); err != nil {
		t.Fatalf("B never queued behind A's node: %v", err)
	}
	select {
	case err := <-granted:
		t.Fatalf("B's Lock returned (%v) while A's node was first", err)
	default:
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatalf("A's Unlock after its failed Lock: %v, want success (A held the lock)", err)
	}
	if err := <-granted; err != nil {
		t.Fatalf("B's Lock after A's Unlock: %v", err)
	}
	t.Log("A's Lock returned an error, yet A held the lock until its Unlock: B waited behind it")
}
