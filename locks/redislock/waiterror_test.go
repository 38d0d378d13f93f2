package redislock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// failRecheck fails, once armed, every re-check script its client sends
// with err, without sending it: Redis failing a waiter's request.
type failRecheck struct {
	passDialsAndPipelines
	armed  atomic.Bool
	failed atomic.Int64
	err    error
}

func (f *failRecheck) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 && isRecheck(args[0], args[1]) && f.armed.Load() {
			f.failed.Add(1)
			cmd.SetErr(f.err)
			return f.err
		}
		return next(ctx, cmd)
	}
}

// TestWaitReturnsARedisError: a Redis error on a waiter's re-check ends its
// Lock with that error. The wait loop's err was shadowed, so the error was
// dropped and the waiter went on from an empty reply, asleep for a TTL
// that a manual clock never ends.
func TestWaitReturnsARedisError(t *testing.T) {
	const ttl = time.Second
	r := redisfake.New(t, redisfake.ManualTime(epoch))
	clock := r.Clock().(*fakes.Clock)
	injected := errors.New("LOADING Redis is loading the dataset in memory")
	fail := &failRecheck{err: injected}
	client := r.NewClient()
	client.AddHook(fail)
	a, err := New(client, "res", append(r.LockOptions(), locks.WithTTL(ttl))...)
	if err != nil {
		t.Fatal(err)
	}
	b := newLocker(t, r, "res", locks.WithTTL(ttl))
	held := locktest.MustLock(t, b)
	defer func() { _ = held.Unlock(context.Background()) }()
	timers := clock.Pending()

	got := make(chan error, 1)
	go func() {
		lease, err := a.Lock(context.Background())
		if lease != nil {
			_ = lease.Unlock(context.Background())
		}
		got <- err
	}()
	waitUntil(t, "a asleep on the clock", func() bool { return clock.Pending() > timers })
	fail.armed.Store(true)
	clock.Advance(ttl + 20*time.Millisecond) // a's sleep (b's TTL and a jitter) ends: a checks again
	waitUntil(t, "a's re-check", func() bool { return fail.failed.Load() >= 1 })
	deadline := time.After(5 * time.Second)
	select {
	case err := <-got:
		if !errors.Is(err, injected) {
			t.Fatalf("a's Lock returned %v, want the re-check's error %v", err, injected)
		}
	case <-deadline:
		t.Fatal("a's Lock did not return the re-check's error: the wait went on from an empty reply")
	}
}
