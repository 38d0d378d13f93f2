package redislock

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/locks"
)

// RWKeys returns the Redis keys of read-write mutex name under prefix, all
// under Key's hash tag: the sorted sets of the readers' leases, of the
// writer's lease and of the writers waiting, each member an owner scored by
// the end of its lease (or wait) in µs of the server's TIME, and the
// fencing counter.
func RWKeys(prefix, name string) (readers, writer, waiting, fence string) {
	readers, writer, waiting, fence, _ = layout.RedisRWKeys(prefix, name)
	return readers, writer, waiting, fence
}

// RWMutex is a read-write lock on one Redis server: any number of readers
// or one writer hold leases at once. Its two views are locks.Lockers:
// RLocker takes a reader's lease, Locker a writer's. Every lease is a lease
// as a Locker's is (TTL, watchdog renewal, Done and Err, max hold), with a
// fencing token from one counter shared by readers and writers, so every
// grant's token is above every earlier grant's, in either mode.
//
// Writers are not starved: a writer waiting in Lock turns new readers
// away, so the readers holding drain, and the lock, once free, is handed
// to a waiting writer (the one whose place in the wait would lapse first)
// before anyone else can take it. Waiting readers and writers otherwise
// race (not in arrival order). A waiting writer that crashed may be
// handed the lock: it then holds it, unused, for one TTL.
//
// Storage: see RWKeys. Every operation is one Lua script that first drops
// the leases and waits whose end on the server's clock has passed, so an
// expired lease never keeps anyone out and is never renewed. A waiting
// writer's place lasts one TTL and is renewed by its attempts, which it
// makes at least every half TTL; a writer that gives up withdraws it (and
// gives back the lock if it was handed it meanwhile). A writer handed the
// lock takes it at its next attempt, which starts its lease anew.
//
// Waiting is notified: a release publishes on the lock's channel and every
// goroutine waiting through any RWMutex of that name tries again. A waiter
// also tries again once the earliest lease in its way may have ended (plus
// jitter), which covers holders that crash without unlocking.
//
// A reader cannot upgrade to a writer: a writer's Lock by an owner who
// reads waits for its own read lease to end.
type RWMutex struct {
	client  redis.UniversalClient
	name    string
	opt     locks.Options
	keys    []string // readers, writer, waiting writers, fence
	channel string
	read    *rwSide
	write   *rwSide
}

// rwSide is one mode of an RWMutex, a locks.Locker.
type rwSide struct {
	m       *RWMutex
	mode    string // "r" or "w", as acquireRWScript reads it
	reentry *locks.Reentry
	acq     *notified
}

var _ locks.Locker = (*rwSide)(nil)

// NewRWMutex returns the read-write mutex called name on the Redis server
// behind client. It takes the options New takes, with the same defaults;
// locks.WithOwner makes a later acquisition of the same owner in the same
// mode through this RWMutex return a hold on the lease it holds (see
// locks.WithOwner).
func NewRWMutex(client redis.UniversalClient, name string, opts ...locks.Option) (*RWMutex, error) {
	o, err := resolve(client, name, opts)
	if err != nil {
		return nil, err
	}
	r, w, q, f, channel := layout.RedisRWKeys(o.Prefix, name)
	m := &RWMutex{client: client, name: name, opt: o, keys: []string{r, w, q, f}, channel: channel}
	m.read = m.side("r", 1, " (a writer holds it, or waits)")
	m.write = m.side("w", 2, " (held)")
	m.write.acq.abandon = func(ctx context.Context, owner string) error {
		if err := (rwOps{m: m, owner: owner, set: 3}).Release(ctx); !errors.Is(err, locks.ErrNotHeld) {
			return err
		}
		return nil
	}
	return m, nil
}

func (m *RWMutex) side(mode string, set int, busy string) *rwSide {
	s := &rwSide{m: m, mode: mode, reentry: locks.NewReentry(m.opt)}
	s.acq = newNotified(m.client, m.name, m.channel, m.opt, s.errorf)
	s.acq.busy = busy
	s.acq.script = func(owner string, waiting bool) (*redis.Script, []string, []any) {
		wait := "0"
		if waiting {
			wait = "1"
		}
		return acquireRWScript, m.keys, []any{owner, m.opt.TTL.Microseconds(), m.channel, mode, wait}
	}
	s.acq.ops = func(owner string) locks.LeaseOps { return rwOps{m: m, owner: owner, set: set} }
	return s
}

// Name returns the lock's name.
func (m *RWMutex) Name() string { return m.name }

// RLocker returns the readers' view: its Lock and TryLock take a shared
// (read) lease, which its Unlock gives back.
func (m *RWMutex) RLocker() locks.Locker { return m.read }

// Locker returns the writers' view: its Lock and TryLock take the
// exclusive (write) lease, which its Unlock gives back.
func (m *RWMutex) Locker() locks.Locker { return m.write }

// TryLock makes one attempt in the view's mode; it returns locks.ErrLocked
// (wrapped) when the lock is held in the way (see RWMutex).
func (s *rwSide) TryLock(ctx context.Context) (locks.Lease, error) {
	return s.reentry.Acquire(ctx, true, s.acq.tryLock)
}

// Lock waits until the view's lease is held, ctx ends (an error wrapping
// ctx.Err()) or the wait budget runs out (locks.ErrWaitBudget). See
// RWMutex for how it waits.
func (s *rwSide) Lock(ctx context.Context) (locks.Lease, error) {
	return s.reentry.Acquire(ctx, false, s.acq.lock)
}

func (s *rwSide) errorf(format string, args ...any) error {
	kind := "read"
	if s.mode == "w" {
		kind = "write"
	}
	return fmt.Errorf("redislock rwmutex %q (%s): "+format, append([]any{s.m.name, kind}, args...)...)
}

// rwOps are the owner-checked operations on one lease of an RWMutex, or
// (set 3) on a waiting writer's place.
type rwOps struct {
	m     *RWMutex
	owner string
	set   int // 1 a reader's lease, 2 the writer's, 3 a waiting writer's place
}

func (o rwOps) Renew(ctx context.Context) error { return o.run(ctx, renewRWScript) }

func (o rwOps) Release(ctx context.Context) error { return o.run(ctx, releaseRWScript) }

// run runs script, which returns 0 when owner holds nothing in the set.
func (o rwOps) run(ctx context.Context, script *redis.Script) error {
	n, err := script.Run(ctx, o.m.client, o.m.keys, o.owner, o.m.opt.TTL.Microseconds(), o.m.channel, o.set).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("redislock: %w", locks.ErrNotHeld)
	}
	return nil
}
