package thirdparty_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/redigo"
	redigolib "github.com/gomodule/redigo/redis"
	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// redsyncRedigoLock is the Factory of redsync's Mutex over a redigo pool
// per client, on one miniredis in manual time, with redsync's default
// retry delay (50-250 ms of wall time at random). inMemory dials the
// server in memory (redigo's DialContextFunc with the server's
// DialContext, through a fakes.Conns that the client's crash severs,
// Backend.InProcess); else the pool dials its loopback TCP address, as a
// user's does, and a crash closes the pool. redigo's requests pass no
// Gate (the fakes hook go-redis), so the suite cannot stall them; the
// mapping is redsyncLock's otherwise.
func redsyncRedigoLock(inMemory bool) propertytest.Factory {
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
				conns := fakes.NewConns()
				var dial []redigolib.DialOption
				if inMemory {
					dial = append(dial, redigolib.DialContextFunc(conns.Dial(r.DialContext)))
				}
				pool := &redigolib.Pool{DialContext: func(ctx context.Context) (redigolib.Conn, error) {
					return redigolib.DialContext(ctx, "tcp", r.Addr(), dial...)
				}}
				crash := func() {
					conns.Sever()
					_ = pool.Close()
				}
				env.Cleanup(crash)
				rs := redsync.New(redigo.NewPool(pool))
				l, err := adapter.New(name, o, redigoMutex(rs, o.Prefix+name, o))
				return adapter.WithCrash(l, crash), err
			},
			Clock:     r.Clock(),
			Advance:   r.Advance,
			InProcess: inMemory,
		}, nil
	}
}

// redigoMutex describes redsync's Mutex on key to the kit, with redsync's
// own retry delay.
func redigoMutex(rs *redsync.Redsync, key string, o locks.Options) adapter.Lock {
	acquire := func(wait bool) func(context.Context) (adapter.Grant, error) {
		return func(ctx context.Context) (adapter.Grant, error) {
			m := rs.NewMutex(key, redsync.WithExpiry(o.TTL), redsync.WithTries(math.MaxInt32))
			call := m.TryLockContext
			if wait {
				call = m.LockContext
			}
			var taken *redsync.ErrTaken
			if err := call(ctx); errors.As(err, &taken) {
				return adapter.Grant{}, adapter.Locked("redsync", err)
			} else if err != nil {
				return adapter.Grant{}, err
			}
			ext := func(ctx context.Context) error { _, err := m.ExtendContext(ctx); return redsyncNotHeld(err) }
			rel := func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return redsyncNotHeld(err) }
			return adapter.Grant{Renew: ext, Release: rel}, nil
		}
	}
	return adapter.Lock{Lock: acquire(true), TryLock: acquire(false)}
}

// redsyncStuckWall bounds the wall time of the run over TCP:
// far above propertytest.StuckLimit and the few runs rapid adds to
// shrink, so that only a hang fails it.
const redsyncStuckWall = 60 * time.Second

// redsync over redigo on loopback TCP, with its default retry delay: a
// waiting Lock sleeps 50-250 ms of wall time between attempts while the
// run's clock stands still. Before the scheduler's waits were bounded this
// hung until go test's -timeout (15 minutes). Now the run must end within
// the bound, either with a verdict in best-effort time (redsync is correct
// for its claims: it must pass) or with the scheduler's message, naming
// the cause (wall time) and the fix (the run's clock, or dialing in
// memory). redigo's requests pass no Gate, so the suite never sees the
// poller's attempts; it counts the sleeping waiter blocked after Settle,
// and the runs proceed.
//
// Each run costs the sleeps of a quiescence test beside a socket: by
// default 5 runs, under LOCKPROOF_DEEP=1 the suite's 500.
func TestThirdPartyRedsyncRedigoTCP(t *testing.T) {
	suitemain.SetChecks(t, 5)
	useSeed(t, 0x7ed190)
	began := time.Now()
	rep := propertytest.Check(t, redsyncRedigoLock(false), propertytest.Options{
		Claims:     []propertytest.FaultKind{propertytest.FaultCrash},
		Settle:     20 * time.Millisecond,
		ShrinkRuns: 2,
	})
	took := time.Since(began)
	t.Logf("%d runs in %v; outcomes %v", rep.Runs, took.Round(time.Millisecond), rep.Outcomes)
	if took > redsyncStuckWall {
		t.Errorf("the run took %v of wall time, over %v", took.Round(time.Millisecond), redsyncStuckWall)
	}
	if !rep.Failed {
		if rep.Runs == 0 || rep.Checked[propertytest.Exclusivity] != rep.Runs {
			t.Fatalf("exclusivity checked in %d of %d runs", rep.Checked[propertytest.Exclusivity], rep.Runs)
		}
		return
	}
	for _, want := range []string{"the run is stuck", "wall time", "the run's clock", "in memory"} {
		if !strings.Contains(rep.Output, want) {
			t.Fatalf("failed without the scheduler's message (%q missing):\n%s", want, rep.Output)
		}
	}
	t.Logf("ended stuck, as it may: %s", firstLine(rep.Output, "the run is stuck"))
}

// firstLine is the line of out that holds s.
func firstLine(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// The same redsync over redigo, dialed in memory: a waiter sleeping its
// wall-time delay is then seen blocked at once, and redsync passes its
// own claims (5 runs by default, the suite's 500 under LOCKPROOF_DEEP=1).
func TestThirdPartyRedsyncRedigoInMemory(t *testing.T) {
	suitemain.SetChecks(t, 5)
	ownClaims(t, 0x7ed190, redsyncRedigoLock(true), propertytest.Options{
		Claims: []propertytest.FaultKind{propertytest.FaultCrash},
	})
}
