package zklock

import (
	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/locks"
)

// DefaultRWPrefix is the parent path of every read-write mutex's node
// unless locks.WithPrefix says otherwise: apart from the mutexes' and the
// semaphores', so that locks of one name and different kinds never share
// a node.
const DefaultRWPrefix = "/lockproof-rwmutex"

// RWMutex is a read-write lock on a ZooKeeper ensemble, in the shape of
// Curator's InterProcessReadWriteLock: readers and writers queue together
// as ephemeral sequential children of one node, NodePath(prefix, name), a
// reader's named "_c_<GUID>-__READ__<sequence>" and a writer's
// "_c_<GUID>-__WRIT__<sequence>" (layout.ZKReadMarker, ZKWriteMarker), and
// are ordered by the sequence number alone.
//
//   - A reader holds once no writer's child is ahead of its own; until then
//     it watches the newest writer's child ahead of it, and nothing else.
//     (Curator's reader watches the first writer's child in the queue, so
//     every reader behind any writer wakes at that writer's release, to
//     find another writer ahead and watch again; kazoo's once took writers
//     behind its own child for ones ahead, and a reader and a writer
//     waited for each other for good: python-zk/kazoo#649.)
//   - A writer holds once no child at all is ahead of its own; until then
//     it watches the child just ahead of it, of either kind.
//
// After every wake-up the waiter lists the children again (the child that
// went may have been a waiter that gave up). So readers that come after a
// waiting writer queue behind it, and readers do not starve writers: the
// queue is served in arrival order, readers in a row together. A release
// wakes only those who must look: a writer's, the readers queued right
// behind it (all of which then hold) or the writer right behind it; a
// reader's, the writer right behind it, if any.
//
// Both views are locks.Lockers with Locker's machinery: protected names (a
// create whose reply was lost is found again by its GUID), the session as
// the lease (trusted for TTL − locks.Drift(TTL) after the last round trip
// that proved it), Done and Err on loss, the clean-up of every node the
// Locker no longer wants (a cancelled waiter's, a refused TryLock's), the
// options of New. Each lease is fenced by its child's czxid, from the
// ensemble's one transaction counter: a grant's token is above every
// earlier grant's in either mode, but for readers holding together: a
// reader may be granted after another whose child was created after its
// own, with the smaller token (the semaphore's case: see the package
// doc). A TryLock is refused when any child is in its way
// (a reader's: a writer's, holding or waiting; a writer's: any), and leaves
// no node behind.
//
// A reader cannot upgrade, nor a writer downgrade: the views queue apart
// even for one owner, so a writer's Lock by an owner who reads waits for
// its own read lease to end, and a read's Lock by the writer waits behind
// its own write (Curator grants that read at once, and the write it makes
// possible broke exclusivity: CURATOR-621, apache/curator#1138).
// locks.WithOwner applies to each view on its own.
type RWMutex struct {
	read, write *Locker
}

// NewRWMutex returns the read-write mutex called name on the ZooKeeper
// ensemble behind conn. It takes New's options, with the same defaults but
// for the prefix, DefaultRWPrefix; the TTL is the session timeout the
// server granted conn, or less (see New).
func NewRWMutex(conn *zk.Conn, name string, opts ...locks.Option) (*RWMutex, error) {
	read, err := build(conn, name, DefaultRWPrefix, 1, opts)
	if err != nil {
		return nil, err
	}
	write, err := build(conn, name, DefaultRWPrefix, 1, opts)
	if err != nil {
		return nil, err
	}
	read.role, write.role = roleReader, roleWriter
	return &RWMutex{read: read, write: write}, nil
}

// Name returns the lock's name.
func (m *RWMutex) Name() string { return m.read.name }

// NodePath returns the lock's node, whose children are the readers' and
// writers' contenders (see RWMutex and NodePath).
func (m *RWMutex) NodePath() string { return m.read.path }

// RLocker returns the readers' view: its Lock and TryLock take shared
// leases.
func (m *RWMutex) RLocker() locks.Locker { return m.read }

// Locker returns the writers' view: its Lock and TryLock take the
// exclusive lease.
func (m *RWMutex) Locker() locks.Locker { return m.write }
