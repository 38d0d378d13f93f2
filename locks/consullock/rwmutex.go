package consullock

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/internal/layout"
	"github.com/lockproof/lockproof/locks"
)

// DefaultRWPrefix is the KV prefix of read-write mutexes' keys unless
// locks.WithPrefix says otherwise: apart from the mutexes' and the
// semaphores', so that locks of one name never share keys.
const DefaultRWPrefix = "lockproof-rwmutex/"

// RWKeys returns the Consul KV keys of read-write mutex name under prefix
// (the resolved locks.WithPrefix, DefaultRWPrefix by default): writer, the
// key a writer holds with its session (Key(prefix, name)); readers, the
// prefix of the readers' keys, one per reader, named by its session's ID
// and held by that session; queue, the prefix of the waiters' entries, as
// a mutex's queue.
func RWKeys(prefix, name string) (writer, readers, queue string) {
	return layout.ConsulRWKeys(prefix, name)
}

// RWMutex is a read-write lock on Consul: any number of readers or one
// writer hold leases at once. Its two views are locks.Lockers: RLocker
// takes a reader's lease, Locker a writer's. Every lease is a session's, as
// a mutex's (TTL, watchdog renewal, a monitor closing Done on a loss, max
// hold), fenced by the ModifyIndex of the key it holds: a Raft index, so
// every grant's token is above every earlier grant's, in either mode.
//
// The writer's key (see RWKeys) is a turnstile that readers and writers
// take in turn, exactly as a mutex's key, through the same queue, lock-delay
// and blocking queries. A reader holding it acquires its own key under the
// readers' prefix, reads that key's token back and gives the writer's key
// up at once: readers pass one at a time, a few requests each, and then
// share. A writer holding it keeps it, and waits until no reader holds a
// key, by a blocking query on the readers' prefix; only then is it
// granted, its token the writer's key's ModifyIndex. So a waiting writer
// turns new readers away (they queue behind it), and the readers holding
// drain: writers are not starved, and since readers and writers queue
// together in arrival order, neither are readers.
//
// A reader's key released but left behind belongs to a reader whose session
// was invalidated, and whose lease may still be valid where it runs: the
// waiting writer probes it by acquiring it, which Consul refuses for the
// dead session's lock-delay, and deletes it once acquired. A crashed
// reader's key is so kept from writers as a crashed mutex holder's key is.
//
// An attempt holding the writer's key turns TryLocks away before it is
// granted. Should it lose that key before its grant (its session
// invalidated, say by a stall of two TTLs), its Lock ends with an error
// instead of starting over as a mutex's waiter does: a grant of a later
// attempt, with a later token, would leave those refusals refused by
// nobody.
//
// A reader cannot upgrade: a writer's Lock by an owner who reads waits for
// its own read lease to end.
type RWMutex struct {
	read, write *Locker
	readers     string // the prefix of the readers' keys
}

// NewRWMutex returns the read-write mutex called name on the Consul
// cluster behind client, with a lock-delay of DefaultLockDelay(TTL) and
// servers assumed to accept session TTLs from MinSessionTTL. Its keys are
// under DefaultRWPrefix unless locks.WithPrefix says; the other options are
// New's, applied to each view (locks.WithOwner makes a later acquisition by
// the same owner through the same view return a hold on its lease).
func NewRWMutex(client *api.Client, name string, opts ...locks.Option) (*RWMutex, error) {
	o, err := locks.Resolve(DefaultRWPrefix, opts...)
	if err != nil {
		return nil, fmt.Errorf("consullock: %w", err)
	}
	return NewRWMutexWithSession(client, name, Session{LockDelay: DefaultLockDelay(o.TTL)}, opts...)
}

// NewRWMutexWithSession is NewRWMutex with the Consul-specific settings s.
func NewRWMutexWithSession(client *api.Client, name string, s Session, opts ...locks.Option) (*RWMutex, error) {
	read, err := build(client, name, DefaultRWPrefix, s, opts)
	if err != nil {
		return nil, err
	}
	write, err := build(client, name, DefaultRWPrefix, s, opts)
	if err != nil {
		return nil, err
	}
	_, readers, _ := RWKeys(read.opt.Prefix, name)
	m := &RWMutex{read: read, write: write, readers: readers}
	read.admit, write.admit = m.admitReader, m.admitWriter
	return m, nil
}

// Name returns the lock's name.
func (m *RWMutex) Name() string { return m.read.name }

// Key returns the writer's key (see RWKeys), under which the readers' keys
// and the queue are.
func (m *RWMutex) Key() string { return m.read.key }

// RLocker returns the readers' view: its Lock and TryLock take a shared
// (read) lease, which its Unlock gives back. A TryLock is refused while a
// writer holds or waits, and also while another reader is being admitted
// (it holds the writer's key for a few requests).
func (m *RWMutex) RLocker() locks.Locker { return m.read }

// Locker returns the writers' view: its Lock and TryLock take the
// exclusive (write) lease, which its Unlock gives back. A TryLock is
// refused while anyone holds.
func (m *RWMutex) Locker() locks.Locker { return m.write }

// admitReader admits the attempt, which has just acquired the writer's key,
// as a reader: it acquires its reader's key, reads that key's token back,
// gives the writer's key up and leaves the queue. The lease is on the
// reader's key; its release deletes it.
func (m *RWMutex) admitReader(ctx context.Context, a *attempt) (locks.Lease, error) {
	l := a.l
	a.reader = m.readers + a.session // from here on, abandon deletes it
	ok, err := a.acquire(ctx, a.reader)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, errLost // a key of a new session's own: only an invalidation refuses it
	}
	token, last, err := a.readBack(ctx, a.reader)
	if err != nil {
		return nil, err
	}
	rctx, cancel := l.request(ctx)
	ok, _, err = l.client.KV().Release(&api.KVPair{Key: a.key, Session: a.session}, writeOpts(rctx))
	cancel()
	switch {
	case err != nil:
		return nil, l.errorf("give the writer's key up: %w", l.cause(ctx, err))
	case !ok:
		return nil, errLost
	}
	a.leaveQueue(ctx)
	return a.hold(ctx, a.reader, token, last, a.reader, a.entry)
}

// admitWriter grants the writer's lease to the attempt, which has just
// acquired the writer's key, once no reader holds a key: a Lock waits for
// them (see drain), a TryLock looks once and is refused (a nil lease and
// nil error) if one does.
func (m *RWMutex) admitWriter(ctx context.Context, a *attempt) (locks.Lease, error) {
	l := a.l
	d := &drain{readers: m.readers, a: a, w: waiter{l: l, began: l.opt.Clock.Now()}}
	if a.wait != nil {
		d.w.began = a.wait.began // the Lock call's wait budget
	}
	gone, err := d.wait(ctx, a.wait != nil)
	if err != nil || !gone {
		return nil, err
	}
	return a.grant(ctx)
}

// drain is a writer's wait, holding the writer's key, for the readers to
// leave.
type drain struct {
	readers  string // the readers' prefix
	a        *attempt
	w        waiter               // its budget, blocking queries and lock-delay back-off
	index    uint64               // for the next blocking query on the readers' prefix
	released map[string]time.Time // readers' keys seen released, and since when
	probeAt  time.Time            // when to probe again the released keys that refused
}

// wait lists the readers' keys until none is left. A key still held is a
// reader's lease. A key released but left behind belongs to a reader whose
// session was invalidated (its lock-delay may be running, and its holder
// may still believe in its lease) or to a reader's Unlock between its
// release and its deletion: the writer probes it by acquiring it, which
// Consul refuses under a lock-delay, and deletes it once acquired. With
// block false, wait looks once and reports whether the readers are gone.
// Else it blocks on the readers' prefix between looks, woken by any change
// of it, by the renewal of the waiting session (TTL/2), or when a probe
// refused by a lock-delay is due again; it returns true once the readers
// are gone, or an error (ctx, wait budget, session lost).
func (d *drain) wait(ctx context.Context, block bool) (bool, error) {
	l := d.w.l
	for {
		if err := d.a.keepAlive(ctx); err != nil {
			return false, err
		}
		now := l.opt.Clock.Now()
		due := !d.probeAt.IsZero() && !now.Before(d.probeAt)
		index, delayEnd := d.index, d.probeAt
		if due || !block {
			index, delayEnd = 0, time.Time{}
		}
		wait, deadline, err := d.w.bound(now, d.a, delayEnd)
		if err != nil {
			return false, err
		}
		var pairs api.KVPairs
		meta, err := d.w.query(ctx, index, wait, deadline, func(q *api.QueryOptions) (m *api.QueryMeta, err error) {
			pairs, m, err = l.client.KV().List(d.readers, q)
			return m, err
		})
		if err != nil {
			return false, err
		}
		d.index = nextIndex(index, meta.LastIndex)
		if index != 0 && d.index == index {
			continue // the wait timed out, nothing changed: renew, look at the clock
		}
		held, refused, err := d.look(ctx, pairs)
		switch {
		case err != nil:
			return false, err
		case !held && !refused:
			return true, nil
		case !block:
			return false, nil
		case !refused:
			d.probeAt = time.Time{}
		case d.probeAt.IsZero() || due:
			d.probeAt = d.nextProbe()
		}
	}
}

// look reports whether a reader's key in pairs is held, and probes the
// released ones (see wait): refused says one refused the probe.
func (d *drain) look(ctx context.Context, pairs api.KVPairs) (held, refused bool, err error) {
	now := d.w.l.opt.Clock.Now()
	seen := make(map[string]time.Time)
	for _, p := range pairs {
		if p.Session != "" {
			held = true
			continue
		}
		at, ok := d.released[p.Key]
		if !ok {
			at = now
		}
		seen[p.Key] = at
	}
	d.released = seen
	for _, p := range pairs {
		if p.Session != "" {
			continue
		}
		free, err := d.probe(ctx, p.Key)
		if err != nil {
			return held, refused, err
		}
		if !free {
			refused = true
			continue
		}
		delete(d.released, p.Key)
	}
	return held, refused, nil
}

// probe acquires a released reader's key with the writer's session, and
// deletes it if acquired; false when Consul refuses (a lock-delay).
func (d *drain) probe(ctx context.Context, key string) (bool, error) {
	l := d.w.l
	ok, err := d.a.acquire(ctx, key)
	if err != nil || !ok {
		return false, err
	}
	rctx, cancel := l.request(ctx)
	defer cancel()
	if _, err := l.client.KV().Delete(key, writeOpts(rctx)); err != nil {
		return false, l.errorf("lock: delete a dead reader's key: %w", l.cause(ctx, err))
	}
	return true, nil
}

// nextProbe is when to probe again after a released reader's key refused
// the writer: its lock-delay, if the dead reader's session had the
// writer's, is over by the time the key was first seen released + the
// lock-delay; after that the probes back off as a waiter's tries do (see
// waiter.delayEnd).
func (d *drain) nextProbe() time.Time {
	var first time.Time
	for _, at := range d.released {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	d.w.freeSince = first
	return d.w.delayEnd()
}
