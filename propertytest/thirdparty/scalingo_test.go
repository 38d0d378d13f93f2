package thirdparty_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	scalingo "github.com/Scalingo/go-etcd-lock/v5/lock"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/adapter"
)

// Scalingo/go-etcd-lock's timeouts, all of wall time (the library takes no
// context): scalingoTry bounds Acquire, its single attempt, which waits up
// to that long for the lock before it reports it taken; scalingoMaxWait
// bounds WaitAcquire, and so the life of a waiter given up on; scalingoCool
// is the pause between two attempts of WaitAcquire.
const (
	scalingoTry     = 500 * time.Millisecond
	scalingoMaxWait = 6 * time.Second
	scalingoCool    = 20 * time.Millisecond
)

// scalingoLock is the Factory of github.com/Scalingo/go-etcd-lock/v5/lock
// (v5.0.8) on the embedded etcd s, in real time as etcdMutex (Clock the
// system clock, Advance sleeps), every run under a key prefix of its own.
//
// What the library does (lock/acquire.go): Acquire(key, ttl) and
// WaitAcquire(key, ttl) make a concurrency.Session of ttl whole seconds on
// the caller's client, kept alive by the client in wall time, and take a
// concurrency.Mutex on "/etcd-lock/"+key with Mutex.Lock under a timeout of
// its own (WithTryLockTimeout): Acquire gives up with ErrAlreadyLocked when
// that runs out, WaitAcquire tries again after a cool-down until
// WithMaxTryLockTimeout. A grant is released by the library itself ttl
// seconds after it returned (time.AfterFunc), or earlier by Release
// (Mutex.Unlock, then the session's Close, a Revoke). It has no renewal,
// no fencing token (Lock is an interface with Release alone), and no
// context anywhere: its requests pass no locks.Gate although the client is
// gated, so the scheduler stalls it only at the kit's Observer points.
//
// Mapping:
//   - One client per Locker, dialed through a fakes.Conns: a crash severs
//     it (adapter.WithCrash), so the session's keep-alive and the
//     auto-release fail as a dead process's would, and the lease expires
//     by its TTL.
//   - TryLock is Acquire, on an EtcdLocker whose attempt waits scalingoTry;
//     ErrAlreadyLocked is locks.ErrLocked. Lock is WaitAcquire; since it
//     takes no context, it runs on a goroutine of its own and a Lock whose
//     ctx ends returns at once, its grant, if one comes, released when it
//     comes (as a caller that gave up would).
//   - Start: the call's (the session is granted inside it); the library's
//     own release comes ttl after the grant returned, later than the
//     kit's deadline.
//   - Renew: none (the library has none). Unlock is Release, which never
//     says whether the lock was still held.
func scalingoLock(s *etcdfake.Server) propertytest.Factory {
	var runs atomic.Int64
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		prefix := s.Prefix() + "scalingo" + strconv.FormatInt(runs.Add(1), 10) + "/"
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				o, err := locks.Resolve(prefix, opts...)
				if err != nil {
					return nil, err
				}
				if o.TTL%time.Second != 0 {
					return nil, fmt.Errorf("scalingo adapter: TTL %v: the library takes whole seconds", o.TTL)
				}
				conns := fakes.NewConns()
				c := s.NewClientThrough(conns)
				env.Cleanup(func() { _ = c.Close() })
				l := scalingoAdapter(c, o.Prefix+name, int(o.TTL/time.Second))
				al, err := adapter.New(name, o, adapter.Lock{Lock: l.wait, TryLock: l.try})
				if err != nil {
					return nil, err
				}
				return adapter.WithCrash(al, conns.Sever), nil
			},
			Clock:   locks.SystemClock{},
			Advance: time.Sleep,
		}, nil
	}
}

// scalingoClient is one client's two EtcdLockers (one per timeout) on one
// key.
type scalingoClient struct {
	attempt, waiting scalingo.Locker
	key              string
	ttl              int
}

// scalingoAdapter makes the lockers of one client on c.
func scalingoAdapter(c *clientv3.Client, key string, ttl int) *scalingoClient {
	return &scalingoClient{
		attempt: scalingo.NewEtcdLocker(c, scalingo.WithTryLockTimeout(scalingoTry),
			scalingo.WithMaxTryLockTimeout(scalingoMaxWait), scalingo.WithCooldownTryLockDuration(scalingoCool)),
		waiting: scalingo.NewEtcdLocker(c, scalingo.WithTryLockTimeout(scalingoMaxWait),
			scalingo.WithMaxTryLockTimeout(scalingoMaxWait), scalingo.WithCooldownTryLockDuration(scalingoCool)),
		key: key, ttl: ttl,
	}
}

// grant is a Grant of the library's lock l.
func scalingoGrant(l scalingo.Lock) adapter.Grant {
	return adapter.Grant{Release: func(context.Context) error { return l.Release() }}
}

// try is Acquire: ErrAlreadyLocked is locks.ErrLocked.
func (c *scalingoClient) try(ctx context.Context) (adapter.Grant, error) {
	l, err := c.attempt.Acquire(c.key, c.ttl)
	var taken *scalingo.ErrAlreadyLocked
	switch {
	case errors.As(err, &taken):
		return adapter.Grant{}, adapter.Locked("go-etcd-lock", err)
	case err != nil:
		return adapter.Grant{}, err
	}
	return scalingoGrant(l), nil
}

// wait is WaitAcquire, given up on when ctx ends: a grant that comes later
// is released at once.
func (c *scalingoClient) wait(ctx context.Context) (adapter.Grant, error) {
	type result struct {
		l   scalingo.Lock
		err error
	}
	res := make(chan result, 1)
	go func() {
		l, err := c.waiting.WaitAcquire(c.key, c.ttl)
		res <- result{l, err}
	}()
	select {
	case r := <-res:
		if r.err != nil {
			return adapter.Grant{}, r.err
		}
		return scalingoGrant(r.l), nil
	case <-ctx.Done():
		go func() {
			if r := <-res; r.err == nil {
				_ = r.l.Release()
			}
		}()
		return adapter.Grant{}, fmt.Errorf("go-etcd-lock adapter: WaitAcquire given up: %w", ctx.Err())
	}
}
