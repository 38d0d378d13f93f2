package backends

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/etcdlock"
	"github.com/lockproof/lockproof/propertytest"
)

// etcdTimeout bounds the housekeeping requests of the etcd factories.
const etcdTimeout = 10 * time.Second

// EtcdLockOptions are the Options to run EtcdLock with (TTL 1s, Slack
// 750ms, Settle 50ms), for the reasons given on EtcdLock; EtcdLockOn takes
// EtcdLockOnOptions.
func EtcdLockOptions() propertytest.Options {
	return propertytest.Options{TTL: time.Second, Slack: 750 * time.Millisecond, Settle: 50 * time.Millisecond}
}

// EtcdLockOnOptions are the Options to run EtcdLockOn with on a cluster of
// etcd's default timing (TTL 1.5s, Slack 1.25s, Settle 50ms): see
// EtcdLockOn.
func EtcdLockOnOptions() propertytest.Options {
	return propertytest.Options{TTL: 1500 * time.Millisecond, Slack: 1250 * time.Millisecond, Settle: 50 * time.Millisecond}
}

// EtcdLock is the Factory of etcdlock on a one-member etcd embedded in the
// process (etcdfake.Start with ForceEmbeddedEtcd: never a real cluster).
// etcd's leases follow the server's wall clock in whole seconds: Clock is
// the system clock and Advance sleeps, so every run lasts seconds.
//
// Run it with EtcdLockOptions(): TTL 1s, Slack 750ms, Settle 50ms, because
//
//   - etcd raises a lease to 1.5 election timeouts (here 500ms), rounded up
//     to whole seconds: 1s. A Locker reports the deadline its session's
//     last renewal gives, which the suite ends the lease at
//     (LeaseOutput.Deadline), so a lease shorter than the TTL is no alarm;
//   - the server revokes an expired lease at its next check, every 500ms,
//     so a crashed holder's key is gone within TTL + Slack;
//   - a Lock woken by a deletion re-checks and renews in a few requests,
//     slower under the race detector than the default Settle.
//
// Claims: the defaults, FaultCrash and FaultPause (fenced by the key's
// create revision). Its one fault, FaultClockJump, revokes the holder's
// lease now, as a jump of the server's clock would: the next waiter is
// granted before the holder's local deadline, so it is not claimed.
func EtcdLock() propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		s, err := etcdfake.Start(etcdfake.ForceEmbedded())
		if err != nil {
			return nil, fmt.Errorf("backends: %w", err)
		}
		propertytest.CloseAtCleanup(env, "the embedded etcd", s)
		be := etcdBackend(s)
		be.Faults = []propertytest.Fault{{
			Name: "revoke the holder's lease (the server's clock jumps)", Kind: propertytest.FaultClockJump,
			Inject: func() error { return revokeHolder(s, be.lockName) },
		}}
		return be.Backend, nil
	}
}

// EtcdSemaphore is the Factory of etcdlock.NewSemaphore of permits permits
// on a one-member etcd embedded in the process, in real time as EtcdLock.
// Run it with EtcdLockOptions() and Options.Permits set to permits. It
// offers no backend fault.
func EtcdSemaphore(permits int) propertytest.Factory {
	return onEmbeddedEtcd(func(c *clientv3.Client, name string, opts ...locks.Option) (locks.Locker, error) {
		return etcdlock.NewSemaphore(c, name, permits, opts...)
	})
}

// EtcdRWMutex is the Factory of etcdlock.NewRWMutex on a one-member etcd
// embedded in the process, in real time as EtcdLock: each client's Locker
// is the ReadWriteLocker of the lock's two views. Run it with
// EtcdLockOptions() and Options.ReadWrite. It offers no backend fault.
func EtcdRWMutex() propertytest.Factory {
	return onEmbeddedEtcd(func(c *clientv3.Client, name string, opts ...locks.Option) (locks.Locker, error) {
		m, err := etcdlock.NewRWMutex(c, name, opts...)
		if err != nil {
			return nil, err
		}
		return propertytest.RWViews(m.RLocker(), m.Locker()), nil
	})
}

// onEmbeddedEtcd is the Factory of the lock newLocker makes on a
// one-member etcd embedded in the process, without backend faults.
func onEmbeddedEtcd(newLocker func(c *clientv3.Client, name string, opts ...locks.Option) (locks.Locker, error)) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		s, err := etcdfake.Start(etcdfake.ForceEmbedded())
		if err != nil {
			return nil, fmt.Errorf("backends: %w", err)
		}
		propertytest.CloseAtCleanup(env, "the embedded etcd", s)
		return etcdBackendWith(s, newLocker).Backend, nil
	}
}

// EtcdLockOn is the Factory of etcdlock on the real etcd cluster at
// endpoints (client URLs, "http://127.0.0.1:2379"), under a key prefix of
// its own that is deleted after every run; the sessions of crashed clients
// expire by their TTL. Clock is the system clock and Advance sleeps, as
// for EtcdLock. Run it with EtcdLockOnOptions(): the server's lease is at
// least 1.5 election timeouts, rounded up to whole seconds (2s with etcd's
// default 1s election timeout), so Slack must be at least that lease +
// 0.5s − TTL. Claims: the defaults. No backend fault.
// It chooses the cluster with etcdfake.At, not through the environment.
func EtcdLockOn(endpoints []string) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		if len(endpoints) == 0 {
			return nil, fmt.Errorf("backends: EtcdLockOn needs the cluster's endpoints")
		}
		s, err := etcdfake.Start(etcdfake.At(endpoints...))
		if err != nil {
			return nil, fmt.Errorf("backends: %w", err)
		}
		propertytest.CloseAtCleanup(env, "the etcd fake", s)
		return etcdBackend(s).Backend, nil
	}
}

// etcdBackendOf is a Backend of etcdlock, and the name of the lock its
// lockers were made for (the fault needs it).
type etcdBackendOf struct {
	*propertytest.Backend
	lockName string
}

// etcdBackend returns the Backend of etcdlock on s in real time, each
// locker on a client of its own.
func etcdBackend(s *etcdfake.Server) *etcdBackendOf {
	return etcdBackendWith(s, func(c *clientv3.Client, name string, opts ...locks.Option) (locks.Locker, error) {
		return etcdlock.New(c, name, opts...)
	})
}

// etcdBackendWith is etcdBackend for the lockers newLocker makes.
func etcdBackendWith(s *etcdfake.Server, newLocker func(c *clientv3.Client, name string, opts ...locks.Option) (locks.Locker, error)) *etcdBackendOf {
	be := &etcdBackendOf{}
	be.Backend = &propertytest.Backend{
		NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
			be.lockName = name
			return newLocker(s.NewClient(), name, append(s.LockOptions(), opts...)...)
		},
		Clock:   locks.SystemClock{},
		Advance: time.Sleep,
	}
	return be
}

// revokeHolder revokes the lease of lock name's holder (the contender with
// the smallest create revision), if any: etcdfake.Server.ExpireLock, with
// nobody holding the lock (or the holder's lease ended meanwhile) no error.
func revokeHolder(s *etcdfake.Server, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), etcdTimeout)
	defer cancel()
	err := s.ExpireLock(ctx, name)
	if err != nil && !errors.Is(err, fakes.ErrNoHolder) {
		return fmt.Errorf("backends: %w", err)
	}
	return nil
}
