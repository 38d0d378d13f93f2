// Package layout is the one definition of where each lock of this module
// keeps its state on its backend: the Redis key of a lock name, the etcd
// key prefix of its contenders, the Consul key, the MySQL table and row,
// the ZooKeeper node and its contenders' names.
//
// The lock packages build their keys with it, and the fakes find a lock's
// state with it (to expire the holder now, say). The fakes cannot import
// the lock packages: those packages' own tests import the fakes, which
// would be an import cycle. So the layout lives here, below both, and
// imports nothing of the project. Users of the locks read the layout
// through the lock packages' exported functions (redislock.Key,
// etcdlock.Key, consullock.Key, mysqllock.DefaultTable, zklock.NodePath),
// which call this package.
package layout

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RedisKey is the key that holds lock name under prefix, for redislock on
// one server and for redlock on every node: the name in braces, a Redis
// Cluster hash tag, so that the lock's other keys (RedisKey + ":fence",
// ":queue", ...) land on the same slot.
func RedisKey(prefix, name string) string { return prefix + "{" + name + "}" }

// RedisRWKeys are the keys of redislock's read-write mutex name under
// prefix, all under RedisKey's hash tag: the readers' leases and the
// writer's lease (sorted sets of owners scored by the end of their lease,
// in µs of the server's TIME), the FIFO list of the waiters, the fencing
// counter, and the prefix of the waiters' pub/sub channels (":" and a
// waiting RWMutex mode's id follow it).
func RedisRWKeys(prefix, name string) (readers, writer, waiting, fence, channel string) {
	k := RedisKey(prefix, name) + ":rw"
	return k + ":r", k + ":w", k + ":q", k + ":fence", k + ":free"
}

// EtcdName is lock name as it ends an etcd key: "%" and "/" are
// percent-encoded, so that no lock's key range holds another's (lock "a"
// must not see the keys of lock "a/b" as its contenders).
func EtcdName(name string) string {
	if !strings.ContainsAny(name, "%/") {
		return name
	}
	return strings.NewReplacer("%", "%25", "/", "%2F").Replace(name)
}

// EtcdKey is where etcdlock's lock name lives under prefix. In queue mode
// (naive false) it is the prefix of the contenders' keys, ending in "/":
// each contender's key is EtcdKey + the hex id of its lease, and the holder
// is the contender with the smallest create revision. In naive mode it is
// the one lock key.
func EtcdKey(prefix, name string, naive bool) string {
	key := prefix + EtcdName(name)
	if !naive {
		key += "/"
	}
	return key
}

// ConsulKey is the Consul KV key of consullock's lock name under prefix:
// the two joined as they are. The session holding the key is the holder's.
func ConsulKey(prefix, name string) string { return prefix + name }

// ConsulPermitSegment is the path segment under a consullock semaphore's
// key that holds its permits.
const ConsulPermitSegment = ".permit"

// ConsulPermit is the Consul KV key of permit i (0 to permits-1) of the
// consullock semaphore whose key is key (ConsulKey): key/.permit/i. The
// session holding it is that permit's holder's.
func ConsulPermit(key string, i int) string { return ConsulPermits(key) + strconv.Itoa(i) }

// ConsulPermits is the KV prefix of the permits of the consullock
// semaphore whose key is key: key/.permit/.
func ConsulPermits(key string) string {
	return strings.TrimSuffix(key, "/") + "/" + ConsulPermitSegment + "/"
}

// ConsulQueueSegment is the path segment under a consullock key that holds
// the queue of its waiters: one entry per waiting session.
const ConsulQueueSegment = ".queue"

// ConsulQueue is the KV prefix of the queue entries of the consullock lock
// (mutex, semaphore or read-write mutex) whose key is key: key/.queue/. A
// waiter's entry is this prefix + its session's ID, acquired by that
// session.
func ConsulQueue(key string) string {
	return strings.TrimSuffix(key, "/") + "/" + ConsulQueueSegment + "/"
}

// ConsulReaderSegment is the path segment under a consullock read-write
// mutex's key that holds its readers' keys.
const ConsulReaderSegment = ".reader"

// ConsulRWKeys returns where consullock's read-write mutex name lives under
// prefix: writer, the key (ConsulKey) whose session is the writer's, a
// waiting writer's or a reader's being admitted; readers, the KV prefix of
// the readers' keys, each readers + the ID of the reader's session, which
// holds it; queue, the prefix of the waiters' entries (ConsulQueue).
func ConsulRWKeys(prefix, name string) (writer, readers, queue string) {
	writer = ConsulKey(prefix, name)
	readers = strings.TrimSuffix(writer, "/") + "/" + ConsulReaderSegment + "/"
	return writer, readers, ConsulQueue(writer)
}

// MySQLDefaultTable is the lock table mysqllock uses unless told another.
const MySQLDefaultTable = "lockproof_locks"

// MySQLTable returns the DDL that creates mysqllock's lock table called
// table if it does not exist. A lock is the row whose name is the lock's
// name; the row is created by the lock's first grant and never deleted, so
// the fence only grows. A row is held while owner is not "" and expires_at,
// on the server's clock, is still ahead.
func MySQLTable(table string) string {
	return "CREATE TABLE IF NOT EXISTS `" + table + "` (\n" +
		"  name       VARBINARY(256)  NOT NULL PRIMARY KEY,\n" +
		"  owner      VARCHAR(64)     NOT NULL DEFAULT '',\n" +
		"  fence      BIGINT UNSIGNED NOT NULL,\n" +
		"  expires_at DATETIME(6)     NOT NULL\n" +
		")"
}

// MySQLExpire returns the statement that ends now, on the server's clock,
// the live lease of one lock in table (its argument: the lock's name), as
// if its holder had stopped renewing a while ago. It changes no row when
// nobody holds the lock. It relies on the columns of MySQLTable.
func MySQLExpire(table string) string {
	return "UPDATE `" + table + "` SET expires_at = DATE_SUB(NOW(6), INTERVAL 1 SECOND)" +
		" WHERE name = ? AND owner <> '' AND expires_at > NOW(6)"
}

// ZKRefused reports whether ZooKeeper refuses r in a path. The server checks
// UTF-16 code units: controls, U+D800–U+F8FF (surrogates, so every rune
// beyond U+FFFF, and the private use area) and U+FFF0–U+FFFF.
func ZKRefused(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0xd800 && r <= 0xf8ff) || r >= 0xfff0
}

// ZKName turns a lock name into one node name: "%", "/" and the characters
// ZooKeeper refuses become %XX for each of their UTF-8 bytes, and a name of
// dots alone ("." or "..", which a path cannot hold) has its dots encoded.
// Distinct names give distinct node names.
func ZKName(name string) string {
	if name == "." || name == ".." {
		return strings.Repeat("%2E", len(name))
	}
	var b strings.Builder
	for _, r := range name {
		if r != '%' && r != '/' && !ZKRefused(r) {
			b.WriteRune(r)
			continue
		}
		var buf [utf8.UTFMax]byte
		for _, c := range buf[:utf8.EncodeRune(buf[:], r)] {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// ZKNode is zklock's node of lock name under prefix, an absolute path
// without a trailing slash ("" for the root): the contenders are its
// children.
func ZKNode(prefix, name string) string {
	return strings.TrimSuffix(prefix, "/") + "/" + ZKName(name)
}

// A contender's node under ZKNode is named ZKProtected + a GUID of 32 hex
// digits + "-" + ZKMarker, to which the server appends the sequence
// number: the names Curator's protected mode and go-zookeeper's zk.Lock
// give their nodes, so that the three queue together.
const (
	ZKProtected = "_c_"
	ZKMarker    = "lock-"
)

// ZKSequence parses the sequence number the server appended to a
// contender's node name: the digits after its last ZKMarker. ok is false
// for a child that is no contender.
func ZKSequence(child string) (seq int64, ok bool) {
	i := strings.LastIndex(child, ZKMarker)
	if i < 0 {
		return 0, false
	}
	s, err := strconv.ParseInt(child[i+len(ZKMarker):], 10, 64)
	return s, err == nil
}

// The contenders of zklock's read-write mutex are named as a mutex's with
// ZKReadMarker (a reader's) or ZKWriteMarker (a writer's) in place of
// ZKMarker: ZKProtected + GUID + "-" + marker + the sequence number. The
// markers are Curator's InterProcessReadWriteLock's, whose protected names
// differ from these only in their GUID's form (a UUID with dashes); no
// test runs the two side by side.
const (
	ZKReadMarker  = "__READ__"
	ZKWriteMarker = "__WRIT__"
)

// ZKRWSequence parses a child of a read-write mutex's node: the sequence
// number after its last ZKReadMarker or ZKWriteMarker, and whether it is a
// writer's. ok is false for a child that is no such contender.
func ZKRWSequence(child string) (seq int64, write, ok bool) {
	i, marker := strings.LastIndex(child, ZKReadMarker), ZKReadMarker
	if w := strings.LastIndex(child, ZKWriteMarker); w > i {
		i, marker, write = w, ZKWriteMarker, true
	}
	if i < 0 {
		return 0, false, false
	}
	s, err := strconv.ParseInt(child[i+len(marker):], 10, 64)
	return s, write, err == nil
}

// ZKHolder returns the contender with the lowest sequence number among a
// lock node's children (a mutex's or a semaphore's, ZKSequence, or a
// read-write mutex's, ZKRWSequence), a holder: of a mutex the holder, of a
// semaphore or read-write mutex one of them. ok is false when there is
// none.
func ZKHolder(children []string) (holder string, ok bool) {
	var lowest int64
	for _, k := range children {
		s, isContender := ZKSequence(k)
		if !isContender {
			s, _, isContender = ZKRWSequence(k)
		}
		if isContender && (!ok || s < lowest) {
			holder, lowest, ok = k, s, true
		}
	}
	return holder, ok
}
