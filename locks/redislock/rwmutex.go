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
// under Key's hash tag: the sorted sets of the readers' leases and of the
// writer's lease, each member an owner scored by the end of its lease in µs
// of the server's TIME, the FIFO list of the waiters (readers and writers),
// and the fencing counter.
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
// Waiters, readers and writers alike, are served in arrival order from one
// queue, so writers are not starved: a reader that finds anyone waiting
// queues behind them. Storage: see RWKeys. Every operation is one Lua
// script that first drops the leases whose end on the server's clock has
// passed, so an expired lease never keeps anyone out and is never renewed.
//
// Waiting is queued, as a Locker's is: a release (or any script that finds
// the lock freed by expiry) hands the lock straight to the waiters at the
// head of the queue that can now enter and are still listening (the
// writer there, or the readers up to the first writer), publishing each
// one's fencing token on its RWMutex's channel for its mode, and wakes
// nobody else. A waiter also looks again once the earliest lease in its
// way may have ended (plus jitter), which covers holders that crash
// without unlocking. A waiter whose process crashed is skipped, as nobody
// listens on its channel.
//
// A reader cannot upgrade to a writer: a writer's Lock by an owner who
// reads waits for its own read lease to end.
type RWMutex struct {
	client redis.UniversalClient
	name   string
	opt    locks.Options
	keys   []string // readers, writer, waiters, fence
	chPfx  string   // + a mode's id is its waiters' channel
	read   *rwSide
	write  *rwSide
}

// rwSide is one mode of an RWMutex, a locks.Locker.
type rwSide struct {
	m       *RWMutex
	mode    string // "r" or "w", as acquireRWScript reads it
	reentry *locks.Reentry
	acq     *scripted
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
	m := &RWMutex{client: client, name: name, opt: o, keys: []string{r, w, q, f}, chPfx: channel + ":"}
	m.read = m.side("r", 1, " (a writer holds it, or someone waits)")
	m.write = m.side("w", 2, " (held)")
	return m, nil
}

func (m *RWMutex) side(mode string, set int, busy string) *rwSide {
	s := &rwSide{m: m, mode: mode, reentry: locks.NewReentry(m.opt)}
	s.acq = newScripted(m.client, m.name, m.chPfx, m.opt, s.errorf)
	s.acq.suffix = " " + mode
	s.acq.queue = m.keys[2]
	s.acq.busy = busy
	s.acq.script = func(owner string, waiting bool) (*redis.Script, []string, []any) {
		return acquireRWScript, m.keys, []any{owner, m.opt.TTL.Microseconds(), m.chPfx, s.acq.member(owner), mode, waitArg(waiting)}
	}
	s.acq.ops = func(owner string) locks.LeaseOps { return rwOps{m: m, owner: owner, set: set} }
	s.acq.withdraw = func(ctx context.Context, owner string) error {
		err := rwOps{m: m, owner: owner, set: set, member: s.acq.member(owner)}.Release(ctx)
		if errors.Is(err, locks.ErrNotHeld) {
			return nil
		}
		return err
	}
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

// rwOps are the owner-checked operations on one lease of an RWMutex; a
// Release with a member takes it out of the queue first.
type rwOps struct {
	m      *RWMutex
	owner  string
	set    int    // 1 a reader's lease, 2 the writer's
	member string // the owner's place in the queue, or ""
}

func (o rwOps) Renew(ctx context.Context) error { return o.run(ctx, renewRWScript) }

func (o rwOps) Release(ctx context.Context) error { return o.run(ctx, releaseRWScript) }

// run runs script, which returns 0 when owner holds nothing in the set.
func (o rwOps) run(ctx context.Context, script *redis.Script) error {
	n, err := script.Run(ctx, o.m.client, o.m.keys, o.owner, o.m.opt.TTL.Microseconds(), o.m.chPfx, o.member, o.set).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("redislock: %w", locks.ErrNotHeld)
	}
	return nil
}
