package thirdparty_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	kvredis "github.com/kvtools/redis"
	"github.com/kvtools/valkeyrie/store"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// kvtoolsTTL is the TTL of the direct reproduction: not a whole number of
// seconds, as most TTLs a user picks are not, so that the library's
// renewal (EX in whole seconds, 1 s here) is shorter than its grant.
const kvtoolsTTL = 1500 * time.Millisecond

// kvtoolsSuiteTTL is the TTL of the suite's runs: its heartbeat, every
// TTL/3 of wall time, never runs within one (a run takes well under 20 s),
// so that the suite's own Renew, which makes the heartbeat's request, is
// the only renewal, on the run's clock. Its renewal is EX 60.
const kvtoolsSuiteTTL = 60999 * time.Millisecond

// kvtoolsTry is how long, in wall time, the adapter's TryLock lets the
// library's Lock try before it aborts it: the library has no single
// attempt, and its wait for a keyspace notification never ends on
// miniredis, so what a caller can do is give Lock a short context.
const kvtoolsTry = 50 * time.Millisecond

// kvtoolsCodec says how a client's Store is built: with the JSON codec
// that the library's compare-and-swap script reads (NewWithCodec with
// JSONCodec, as its docs show), or as valkeyrie.NewStore builds it (New:
// the raw codec).
type kvtoolsCodec int

const (
	kvtoolsJSON kvtoolsCodec = iota
	kvtoolsRaw
)

// newKVStore builds one client's Store on the server at addr, as c says.
func newKVStore(ctx context.Context, addr string, c kvtoolsCodec) (*kvredis.Store, error) {
	if c == kvtoolsRaw {
		return kvredis.New(ctx, []string{addr}, nil)
	}
	return kvredis.NewWithCodec(ctx, []string{addr}, nil, &kvredis.JSONCodec{})
}

// kvtoolsLock is the Factory of kvtools/redis v1.1.0's store.Locker (the
// valkeyrie lock on Redis), one Store per client on one miniredis in
// manual time.
//
// Mapping:
//   - The library builds its go-redis client from an address and its
//     Config has no dialer or hook, so the clients reach miniredis over
//     loopback TCP (InProcess false, Settle) and are not gated: the
//     suite cannot stall them between requests. Its CONFIG SET
//     notify-keyspace-events fails on miniredis, and the library ignores
//     the error.
//   - One store.Locker per acquisition (NewLock with TTL, on Prefix +
//     name): it keeps the value it set and its heartbeat for one hold.
//   - Lock is the library's Lock, with a context of the adapter's that
//     ends with the suite's until the grant and outlives it after: the
//     library's heartbeat, started by the grant, runs on that context and
//     stops when it ends, so a caller that keeps the lock must keep it
//     alive. The heartbeat renews the key every TTL/3 of wall time; while
//     the run's clock stands still between its steps. A wait for a
//     notification never ends on miniredis: a waiting Lock returns only
//     when its context ends.
//   - TryLock is the same Lock given kvtoolsTry of wall time: the library
//     returns ErrAbortTryLock once that runs out after a failed attempt,
//     which the adapter reports as locks.ErrLocked (nothing was set).
//   - Deadline: the kit's, from the start of the call (the SET NX that
//     grants sets the key for the whole TTL, to the millisecond). The
//     library's heartbeat would imply more, each renewal + TTL, but it
//     runs on a goroutine of the library's whose requests nobody can see,
//     so the adapter credits none of it. Grant.Lost is the library's
//     lockHeld channel, closed when a heartbeat fails.
//   - Renew makes the heartbeat's request, on the suite's clock: the
//     Store's AtomicPut of the held pair with the TTL (a compare-and-swap
//     on its LastIndex, so owner-checked), which the library has no
//     exported call for. The pair is read once, right after the grant,
//     while the key can be nobody else's. No fencing token.
//   - Unlock is what the library's Unlock does: stop the heartbeat (here
//     by ending its context), then the Store's AtomicDelete of the held
//     pair; ErrKeyNotFound and ErrKeyModified (the key is gone or
//     another's) are locks.ErrNotHeld. Once lockHeld is closed the
//     heartbeat has ended, and the library's Unlock would block forever on
//     its unbuffered channel: a careful caller then does not call it, and
//     the adapter reports the lock lost.
//   - Crash ends the contexts of every hold and wait of the client and
//     closes its Store (its connections), as a dead process's end.
func kvtoolsLock(codec kvtoolsCodec) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		r, err := redisfake.Start(redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the Redis fake", r)
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				o, err := locks.Resolve(r.Prefix(), append(r.LockOptions(), opts...)...)
				if err != nil {
					return nil, err
				}
				life, die := context.WithCancel(context.Background())
				st, err := newKVStore(life, r.Addr(), codec)
				if err != nil {
					die()
					return nil, err
				}
				crash := func() {
					die()
					_ = st.Close()
				}
				env.Cleanup(crash)
				l, err := adapter.New(name, o, kvtoolsAdapter(life, st, o.Prefix+name, o.TTL))
				return adapter.WithCrash(l, crash), err
			},
			Clock:   r.Clock(),
			Advance: r.Advance,
		}, nil
	}
}

// kvtoolsAdapter describes the library's store.Locker on key to the kit;
// life is the client's, ended by its crash.
func kvtoolsAdapter(life context.Context, st *kvredis.Store, key string, ttl time.Duration) adapter.Lock {
	acquire := func(try bool) func(context.Context) (adapter.Grant, error) {
		return func(ctx context.Context) (adapter.Grant, error) {
			lk, err := st.NewLock(ctx, key, &store.LockOptions{TTL: ttl})
			if err != nil {
				return adapter.Grant{}, err
			}
			// hold lives as long as the client, and ends with ctx until
			// the grant (and with the try's bound for a TryLock).
			hold, cancel := context.WithCancel(life)
			stop := context.AfterFunc(ctx, cancel)
			bound := func() bool { return true }
			if try {
				bound = time.AfterFunc(kvtoolsTry, cancel).Stop
			}
			held, err := lk.Lock(hold)
			// Both must stop before hold ends: else ctx or the try's bound
			// ended the heartbeat the grant had just started.
			inCtx, inBound := stop(), bound()
			if err != nil || !inCtx || !inBound {
				cancel()
				switch {
				case err == nil:
					return adapter.Grant{}, fmt.Errorf("kvtools/redis: granted as the call ended (%v), heartbeat stopped: %w", ctx.Err(), errCutAtGrant)
				case try && errors.Is(err, kvredis.ErrAbortTryLock) && ctx.Err() == nil:
					return adapter.Grant{}, adapter.Locked("kvtools/redis", err)
				}
				return adapter.Grant{}, err
			}
			pair, err := st.Get(ctx, key, nil)
			if err != nil {
				cancel() // held, unknowing: the key lives out its TTL
				return adapter.Grant{}, fmt.Errorf("kvtools/redis: reading the pair it set: %w", err)
			}
			h := &kvHold{st: st, key: key, ttl: ttl, pair: pair}
			return adapter.Grant{
				Lost:  held,
				Renew: h.renew,
				Release: func(ctx context.Context) error {
					select {
					case <-held:
						return adapter.NotHeld("kvtools/redis", errHeartbeatEnded)
					default:
					}
					cancel() // the heartbeat stops, as the library's Unlock stops it
					return h.release(ctx)
				},
			}, nil
		}
	}
	return adapter.Lock{Lock: acquire(false), TryLock: acquire(true)}
}

// kvHold is one acquisition's pair on the key, as the library's heartbeat
// keeps it (its l.last).
type kvHold struct {
	st   *kvredis.Store
	key  string
	ttl  time.Duration
	mu   sync.Mutex
	pair *store.KVPair
}

// renew makes the heartbeat's request: the held pair put again with the
// TTL, compared by its LastIndex.
func (h *kvHold) renew(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, next, err := h.st.AtomicPut(ctx, h.key, h.pair.Value, h.pair, &store.WriteOptions{TTL: h.ttl})
	if err != nil {
		return kvNotHeld(err)
	}
	h.pair = next
	return nil
}

// release makes the library's Unlock request: the held pair deleted,
// compared by its LastIndex.
func (h *kvHold) release(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.st.AtomicDelete(ctx, h.key, h.pair)
	return kvNotHeld(err)
}

// kvNotHeld wraps the library's "the key is gone or another's" answers in
// locks.ErrNotHeld.
func kvNotHeld(err error) error {
	if errors.Is(err, store.ErrKeyNotFound) || errors.Is(err, store.ErrKeyModified) {
		return adapter.NotHeld("kvtools/redis", err)
	}
	return err
}

// errHeartbeatEnded is the cause of a release the adapter does not send:
// the library's heartbeat ended (lockHeld closed), so it reported the
// lock lost, and its Unlock would block forever.
var errHeartbeatEnded = errors.New("the lock's heartbeat ended (lockHeld closed): lost")

// errCutAtGrant is the cause of a grant whose context ended as it came:
// the heartbeat it started is stopped, and the key lives out its TTL.
var errCutAtGrant = errors.New("the lock's context ended at its grant")

// kvtoolsOptions are the suite's options for the kvtools/redis runs: the
// library's own claim (crash safety, no fencing), its TTL, and a Settle
// for clients on loopback TCP.
func kvtoolsOptions() propertytest.Options {
	return propertytest.Options{
		Claims: []propertytest.FaultKind{propertytest.FaultCrash},
		TTL:    kvtoolsSuiteTTL,
		Settle: 20 * time.Millisecond,
	}
}

// kvtools/redis with the JSON codec renews its key with EX in whole
// seconds (60 s for a TTL of 60.999 s), so after a renewal the key dies
// before the holder's deadline and a second client takes it: two holders
// at once, exclusivity.
func TestThirdPartyKVToolsRedisWholeSeconds(t *testing.T) {
	suitemain.SetChecks(t, 100) // stops at the first failure
	shortRuns(t)
	o := kvtoolsOptions()
	o.ShrinkRuns = 20
	strongerClaim(t, 19, kvtoolsLock(kvtoolsJSON), o, propertytest.Exclusivity)
}

// The whole-seconds renewal, directly: one client takes the lock with a
// TTL of 1.5 s (SET NX PX 1500), its heartbeat renews it (EX 1), and
// 1.001 s later, on the server's manual clock, a second client takes it
// while the first one's lockHeld channel is still open and its TTL from
// the grant has 0.5 s to run.
func TestKVToolsRedisRenewsInWholeSeconds(t *testing.T) {
	ctx := context.Background()
	r := redisfake.New(t, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	key := r.Prefix() + "lock"
	first, second := kvStore(t, r, kvtoolsJSON), kvStore(t, r, kvtoolsJSON)

	life, stop := context.WithCancel(ctx)
	defer stop()
	a, err := first.NewLock(ctx, key, &store.LockOptions{TTL: kvtoolsTTL})
	if err != nil {
		t.Fatal(err)
	}
	held, err := a.Lock(life)
	if err != nil {
		t.Fatalf("first Lock: %v", err)
	}
	if ttl := r.Miniredis().TTL(key); ttl != kvtoolsTTL {
		t.Fatalf("TTL after the grant %v, want %v", ttl, kvtoolsTTL)
	}
	// The heartbeat runs every TTL/3 of wall time: wait for its renewal.
	for r.Miniredis().TTL(key) == kvtoolsTTL {
		select {
		case <-held:
			t.Fatal("the heartbeat ended before it renewed")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if ttl := r.Miniredis().TTL(key); ttl != time.Second {
		t.Fatalf("TTL after the heartbeat %v, want the whole second the library sends (EX 1)", ttl)
	}
	r.Advance(time.Second + time.Millisecond)
	b, err := second.NewLock(ctx, key, &store.LockOptions{TTL: kvtoolsTTL})
	if err != nil {
		t.Fatal(err)
	}
	bctx, bstop := context.WithCancel(ctx)
	defer bstop()
	if _, err := b.Lock(bctx); err != nil {
		t.Fatalf("second Lock: %v", err)
	}
	select {
	case <-held:
		t.Log("the first holder's heartbeat has since noticed the loss")
	default:
	}
	t.Logf("second client granted at +1.001 s, before the first holder's TTL of %v from its grant ran out", kvtoolsTTL)
}

// The raw codec, directly: valkeyrie.NewStore builds the store with New,
// whose raw codec stores the lock's value as it is, and the
// compare-and-delete script of Unlock cannot decode it: Unlock fails and
// the key stays until its TTL.
func TestKVToolsRedisRawCodecUnlockFails(t *testing.T) {
	ctx := context.Background()
	r := redisfake.New(t, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	key := r.Prefix() + "lock"
	st := kvStore(t, r, kvtoolsRaw)
	life, stop := context.WithCancel(ctx)
	defer stop()
	lk, err := st.NewLock(ctx, key, &store.LockOptions{TTL: kvtoolsTTL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lk.Lock(life); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	err = lk.Unlock(ctx)
	if err == nil || errors.Is(err, store.ErrKeyNotFound) || errors.Is(err, store.ErrKeyModified) {
		t.Fatalf("Unlock: %v, want the script's error", err)
	}
	if !r.Miniredis().Exists(key) {
		t.Fatal("the key is gone after a failed Unlock")
	}
	t.Logf("Unlock: %v; the key stays for %v", err, r.Miniredis().TTL(key))
}

// kvStore is a Store of the library on r, closed at the end of the test.
func kvStore(t *testing.T, r *redisfake.Server, c kvtoolsCodec) *kvredis.Store {
	t.Helper()
	st, err := newKVStore(context.Background(), r.Addr(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// kvtools/redis as valkeyrie.NewStore builds it (the raw codec): its
// compare-and-delete script cannot decode the raw value, so every Unlock
// fails and the lock is freed by its TTL only: progress.
func TestThirdPartyKVToolsRedisRawCodec(t *testing.T) {
	suitemain.SetChecks(t, 100) // stops at the first failure
	shortRuns(t)
	o := kvtoolsOptions()
	o.ShrinkRuns = 20
	strongerClaim(t, 0x4b7, kvtoolsLock(kvtoolsRaw), o, propertytest.Progress)
}

// shortRuns makes the runs of a kvtools/redis test 15 steps long instead
// of rapid's 30, unless LOCKPROOF_DEEP=1: each run on loopback TCP costs
// wall time in proportion, and the pinned seeds are caught in their first
// run all the same.
func shortRuns(t *testing.T) {
	t.Helper()
	if !suitemain.Deep() {
		suitemain.SetFlag(t, "rapid.steps", "15")
	}
}
