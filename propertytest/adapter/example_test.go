package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
)

// myLock is a lock a user wrote on go-redis, to be tested: SET NX PX
// takes it, and Lua scripts release and extend it only for the value that
// owns it.
type myLock struct {
	rdb *redis.Client
	key string
	ttl time.Duration
}

var (
	errMyNotHeld = errors.New("mylock: not held")
	myRelease    = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)
	myExtend     = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) end return 0`)
)

// Lock tries every 2 ms until it holds the lock or ctx ends, and returns
// the value that owns it.
func (m myLock) Lock(ctx context.Context) (string, error) {
	v := strconv.FormatUint(rand.Uint64(), 36)
	for {
		ok, err := m.rdb.SetNX(ctx, m.key, v, m.ttl).Result()
		if ok || err != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Unlock releases the lock if v still owns it.
func (m myLock) Unlock(ctx context.Context, v string) error {
	return m.owned(myRelease.Run(ctx, m.rdb, []string{m.key}, v).Int())
}

// Extend gives the lock a new TTL if v still owns it.
func (m myLock) Extend(ctx context.Context, v string) error {
	return m.owned(myExtend.Run(ctx, m.rdb, []string{m.key}, v, m.ttl.Milliseconds()).Int())
}

func (m myLock) owned(n int, err error) error {
	if err == nil && n == 0 {
		return errMyNotHeld
	}
	return err
}

// myNotHeld maps myLock's "not held" to locks.ErrNotHeld for the kit.
func myNotHeld(err error) error {
	if errors.Is(err, errMyNotHeld) {
		return adapter.NotHeld("mylock", err)
	}
	return err
}

// myFactory is the propertytest Factory of myLock on a miniredis in manual
// time, through the kit: myLock has no single attempt, so the kit's
// TryLock gives up before a second SET (the first was refused), and the
// SET that granted is the lease's start.
func myFactory(env propertytest.Env) (*propertytest.Backend, error) {
	r, err := redisfake.Start(redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
	if err != nil {
		return nil, err
	}
	propertytest.CloseAtCleanup(env, "the Redis fake", r)
	newLocker := func(name string, opts ...locks.Option) (locks.Locker, error) {
		o, err := locks.Resolve(r.Prefix(), append(r.LockOptions(), opts...)...) // the suite's opts last
		if err != nil {
			return nil, err
		}
		m := myLock{rdb: r.NewClient(), key: o.Prefix + name, ttl: o.TTL}
		return adapter.New(name, o, adapter.Lock{
			Lock: func(ctx context.Context) (adapter.Grant, error) {
				v, err := m.Lock(ctx)
				return adapter.Grant{
					Release: func(ctx context.Context) error { return myNotHeld(m.Unlock(ctx, v)) },
					Renew:   func(ctx context.Context) error { return myNotHeld(m.Extend(ctx, v)) },
				}, err
			},
			WouldWait: func(sent []string, _ string) bool { return len(sent) > 0 }, // a second SET
			Grants:    func(what string) bool { return strings.HasSuffix(what, ": SET") },
		})
	}
	return &propertytest.Backend{NewLocker: newLocker, Clock: r.Clock(), Advance: r.Advance, InProcess: true}, nil
}

// Testing a lock of your own, written on go-redis, with propertytest:
// myFactory gives the suite a Locker per client through the kit. The lock
// claims to survive client crashes (its keys expire); it has no fencing
// token, so it makes no claim about paused holders.
func Example() {
	rep, err := propertytest.RunStandalone(myFactory,
		propertytest.Options{Claims: []propertytest.FaultKind{propertytest.FaultCrash}},
		propertytest.Standalone{Name: "mylock", Checks: 5, Seed: 7})
	if err != nil {
		fmt.Println("no verdict:", err)
		return
	}
	fmt.Printf("runs %d, a claimed property broken: %v\n", rep.Runs, rep.Failed)
	// Output: runs 5, a claimed property broken: false
}
