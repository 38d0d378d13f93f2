package thirdparty_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/amyangfei/redlock-go/v3/redlock"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// redlockGoLock is the Factory of amyangfei/redlock-go v3.0.0's RedLock on
// three miniredis nodes in manual time (redisfake.StartCluster).
//
// Mapping:
//   - The library builds its go-redis v8 clients from addresses
//     ("tcp://host:port"), with no dialer or hook: the clients reach the
//     nodes over loopback TCP (InProcess false, Settle) and are not gated.
//     Its clients have no Close; its lock cache's clean-up goroutine ends
//     with the context given to NewRedLock, which a crash ends.
//   - TryLock is Lock of a RedLock with one try and no delay after it
//     (SetRetryCount(1), SetRetryDelay(1): a random delay below 1 ms, 0);
//     ErrAcquireLock is locks.ErrLocked. Lock is Lock of a second RedLock
//     of the client with unlimited tries and the library's delay (up to
//     200 ms of wall time), so that it waits until ctx ends.
//   - Deadline: the library's, from the validity its Lock returns (TTL
//     less the wall time the attempt took and its drift allowance), added
//     to the run's time at the start of the call: no later than the
//     library's own reckoning, from the successful attempt.
//   - No renewal (the kit's Renew reports adapter.ErrNoRenew), no fencing
//     token. Unlock is UnLock of the RedLock that granted; it returns nil
//     whatever the nodes answered.
func redlockGoLock() propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		g, err := redisfake.StartCluster(3, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the Redis nodes", g)
		var addrs []string
		for _, n := range g.Nodes() {
			addrs = append(addrs, "tcp://"+n.Addr())
		}
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				o, err := locks.Resolve(g.Prefix(), append(g.LockOptions(), opts...)...)
				if err != nil {
					return nil, err
				}
				life, die := context.WithCancel(context.Background())
				env.Cleanup(die)
				try, err := redlock.NewRedLock(life, addrs)
				if err != nil {
					die()
					return nil, err
				}
				try.SetRetryCount(1)
				try.SetRetryDelay(1)
				wait, err := redlock.NewRedLock(life, addrs)
				if err != nil {
					die()
					return nil, err
				}
				wait.SetRetryCount(math.MaxInt32)
				key := o.Prefix + name
				l, err := adapter.New(name, o, adapter.Lock{
					Lock:    redlockGoAcquire(wait, key, o),
					TryLock: redlockGoAcquire(try, key, o),
				})
				return adapter.WithCrash(l, die), err
			},
			Clock:     g.Clock(),
			Advance:   g.Advance,
			Nodes:     3,
			StopNode:  g.Stop,
			StartNode: func(i int) { g.Restart(i, true) },
		}, nil
	}
}

// redlockGoAcquire is one acquisition by rl of key.
func redlockGoAcquire(rl *redlock.RedLock, key string, o locks.Options) func(context.Context) (adapter.Grant, error) {
	return func(ctx context.Context) (adapter.Grant, error) {
		began := o.Clock.Now()
		valid, err := rl.Lock(ctx, key, o.TTL)
		switch {
		case errors.Is(err, redlock.ErrAcquireLock):
			return adapter.Grant{}, adapter.Locked("redlock-go", err)
		case err != nil:
			return adapter.Grant{}, err
		}
		return adapter.Grant{
			Deadline: func() time.Time { return began.Add(valid) },
			Release:  func(ctx context.Context) error { return rl.UnLock(ctx, key) },
		}, nil
	}
}

// redlock-go claims crash safety (a Redlock without fencing tokens): it
// must pass with those claims, availability included. It has no renewal:
// the kit's ErrNoRenew wraps errors.ErrUnsupported, which the suite does
// not hold against it. Its clients reach three miniredis nodes over
// loopback TCP, most of a second a run: by default 4 runs, under
// LOCKPROOF_DEEP=1 the suite's 500.
func TestThirdPartyRedlockGo(t *testing.T) {
	suitemain.SetChecks(t, 4)
	useSeed(t, 0x4ed10c)
	rep := propertytest.Check(t, redlockGoLock(), propertytest.Options{
		Claims:     []propertytest.FaultKind{propertytest.FaultCrash},
		Settle:     20 * time.Millisecond,
		ShrinkRuns: 20,
	})
	t.Logf("%d runs; checked %v; outcomes %v", rep.Runs, rep.Checked, rep.Outcomes)
	switch {
	case rep.Failed:
		t.Fatalf("broken %v:\n%s", rep.Broken(), rep.Output)
	case rep.Runs == 0 || rep.Checked[propertytest.Exclusivity] != rep.Runs:
		t.Fatalf("exclusivity checked in %d of %d runs", rep.Checked[propertytest.Exclusivity], rep.Runs)
	}
}
