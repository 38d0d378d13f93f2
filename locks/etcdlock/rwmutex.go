package etcdlock

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproof/lockproof/locks"
)

// DefaultRWPrefix is the key prefix of NewRWMutex unless locks.WithPrefix
// says otherwise, apart from the locks' and the semaphores'.
const DefaultRWPrefix = "lockproof-rwmutex/"

// RWMutex is a read-write lock on an etcd cluster, in the shape of etcd's
// recipe: readers and writers queue together by create revision under
// Key(prefix, name), a reader's key tagged "r" and a writer's "w" before
// the hex id of its lease. A reader holds once no writer's key was created
// before its own, and waits for the newest such writer; a writer holds once
// no key at all was created before its own, and waits for the newest one.
// So a writer waits for the readers before it, and readers who come after
// it wait for it: overlapping readers do not starve a writer. Each lease is
// as New's, fenced by its key's create revision, which grows across every
// grant of either mode. A TryLock puts its key only if no key is in its
// way (a reader's: no writer's, holding or waiting; a writer's: none).
type RWMutex struct {
	read, write *Locker
}

// NewRWMutex returns the read-write lock called name on the etcd cluster
// behind client. It takes New's options, with DefaultRWPrefix as the
// default prefix; locks.WithOwner applies to each view on its own.
func NewRWMutex(client *clientv3.Client, name string, opts ...locks.Option) (*RWMutex, error) {
	read, err := build(client, name, false, DefaultRWPrefix, 1, opts)
	if err != nil {
		return nil, err
	}
	write, err := build(client, name, false, DefaultRWPrefix, 1, opts)
	if err != nil {
		return nil, err
	}
	read.tag, read.ahead = "r", read.key+"w"
	write.tag = "w"
	return &RWMutex{read: read, write: write}, nil
}

// Name returns the lock's name.
func (m *RWMutex) Name() string { return m.read.name }

// Key returns the prefix of the contenders' keys (see Key).
func (m *RWMutex) Key() string { return m.read.key }

// RLocker returns the readers' Locker: its Lock and TryLock take shared
// leases.
func (m *RWMutex) RLocker() *Locker { return m.read }

// Locker returns the writers' Locker: its Lock and TryLock take the
// exclusive lease.
func (m *RWMutex) Locker() *Locker { return m.write }
