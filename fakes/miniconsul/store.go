package miniconsul

import (
	"sort"
	"strings"
	"sync"
	"time"
)

// entry is a KV entry, in the JSON shape of Consul's DirEntry.
type entry struct {
	LockIndex   uint64
	Key         string
	Flags       uint64
	Value       []byte
	Session     string `json:",omitempty"`
	CreateIndex uint64
	ModifyIndex uint64
}

// equal is Consul's DirEntry.Equal: a write equal to the existing entry
// changes nothing, not even the ModifyIndex.
func (e *entry) equal(o *entry) bool {
	return e.LockIndex == o.LockIndex && e.Key == o.Key && e.Flags == o.Flags &&
		string(e.Value) == string(o.Value) && e.Session == o.Session
}

// serviceCheck is the JSON shape of a session's service check.
type serviceCheck struct {
	ID        string
	Namespace string
}

// session is a session, in the JSON shape of Consul's Session.
type session struct {
	ID            string
	Name          string
	Node          string
	LockDelay     time.Duration
	Behavior      string
	TTL           string
	NodeChecks    []string
	ServiceChecks []serviceCheck
	CreateIndex   uint64
	ModifyIndex   uint64

	ttl     time.Duration // parsed TTL; 0: none
	expires time.Time     // when the server invalidates it; zero without TTL
	timer   Timer
}

// store is the server's state: one index shared by every write, as Consul's
// raft index, the KV table with its tombstones, sessions and lock-delays, and
// the channels that wake blocking queries.
type store struct {
	cfg config

	mu        sync.Mutex
	index     uint64
	txnIndex  uint64 // the index of the transaction being applied, or 0
	kvIndex   uint64 // last write to the KV table (entries and tombstones)
	sessIndex uint64 // last write to the sessions table
	kv        map[string]*entry
	tombs     map[string]uint64 // deleted key -> index of the deletion
	sessions  map[string]*session
	delays    map[string]time.Time // key -> end of its lock-delay
	keyWatch  map[string]chan struct{}
	kvWatch   chan struct{}
	sessWatch chan struct{}
	blocked   int
	blockedCh chan struct{}         // closed and replaced when blocked changes
	parked    map[*parkedQuery]bool // blocking queries parked on one key
	stopped   bool
}

// bootIndex is the raft index of a fresh server before the first write a
// client makes. A fresh single-server agent has applied a handful of raft
// entries by then (its election, its own node and serfHealth check, its
// autopilot and CA state), so its first KV write lands at about 18, never
// at 1: a blocking query on a fresh server's missing key (index 1) is
// woken by that write, and 1 is a stale index for CAS. miniconsul starts
// its index there; the tables' own indexes start at 0, as the agent's KV
// and sessions tables do.
const bootIndex = 17

func newStore(cfg config) *store {
	return &store{
		cfg:       cfg,
		index:     bootIndex,
		kv:        map[string]*entry{},
		tombs:     map[string]uint64{},
		sessions:  map[string]*session{},
		delays:    map[string]time.Time{},
		keyWatch:  map[string]chan struct{}{},
		kvWatch:   make(chan struct{}),
		sessWatch: make(chan struct{}),
		blockedCh: make(chan struct{}),
		parked:    map[*parkedQuery]bool{},
	}
}

// stop disarms every session timer.
func (st *store) stop() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.stopped = true
	for _, s := range st.sessions {
		if s.timer != nil {
			s.timer.Stop()
		}
	}
}

// nextIndexLocked takes the index of a write: the next one, or inside a
// transaction the transaction's.
func (st *store) nextIndexLocked() uint64 {
	if st.txnIndex != 0 {
		return st.txnIndex
	}
	st.index++
	return st.index
}

// appliedLocked records a write that reached the raft log but changed
// nothing (a failed CAS, a lost acquire, a write equal to the entry, a
// delete of a missing key): it takes an index of the raft log, as on the
// agent, and no table's index moves.
func (st *store) appliedLocked() { st.index++ }

// kvChangedLocked wakes the blocking queries that watch key or the KV table.
func (st *store) kvChangedLocked(key string, idx uint64) {
	st.kvIndex = idx
	if ch, ok := st.keyWatch[key]; ok {
		close(ch)
		delete(st.keyWatch, key)
	}
	close(st.kvWatch)
	st.kvWatch = make(chan struct{})
}

func (st *store) sessionsChangedLocked(idx uint64) {
	st.sessIndex = idx
	close(st.sessWatch)
	st.sessWatch = make(chan struct{})
}

// watchKeyLocked returns a channel closed at the next change of key.
func (st *store) watchKeyLocked(key string) <-chan struct{} {
	ch, ok := st.keyWatch[key]
	if !ok {
		ch = make(chan struct{})
		st.keyWatch[key] = ch
	}
	return ch
}

// parkedQuery is a blocking query on one key, waiting past minIndex.
type parkedQuery struct {
	key      string
	minIndex uint64
}

func (st *store) addBlockedLocked(n int) {
	st.blocked += n
	close(st.blockedCh)
	st.blockedCh = make(chan struct{})
}

// kvTableIndexLocked is the index Consul returns for a missing key: that of
// the last write to the KV table, at least 1.
func (st *store) kvTableIndexLocked() uint64 { return max(st.kvIndex, 1) }

// setLocked writes e over key as Consul's kvsSetTxn: CreateIndex is kept, the
// session too unless updateSession, and an unchanged entry keeps its
// ModifyIndex and wakes nobody.
func (st *store) setLocked(e *entry, updateSession bool) {
	old := st.kv[e.Key]
	if old != nil {
		e.CreateIndex = old.CreateIndex
		if !updateSession {
			e.Session = old.Session
		}
		if old.equal(e) {
			return
		}
	} else if !updateSession {
		e.Session = ""
	}
	idx := st.nextIndexLocked()
	if old == nil {
		e.CreateIndex = idx
	}
	e.ModifyIndex = idx
	st.kv[e.Key] = e
	delete(st.tombs, e.Key)
	st.kvChangedLocked(e.Key, idx)
}

// deleteLocked deletes key, leaving a tombstone; it reports whether it
// existed.
func (st *store) deleteLocked(key string, idx uint64) bool {
	if _, ok := st.kv[key]; !ok {
		return false
	}
	delete(st.kv, key)
	st.tombs[key] = idx
	st.kvChangedLocked(key, idx)
	return true
}

// listLocked returns the entries under prefix, sorted by key, and the index
// Consul's KVSList gives: the highest ModifyIndex among them and the
// tombstones under prefix, or the table index when that is 0 or the prefix
// is empty.
func (st *store) listLocked(prefix string) ([]*entry, uint64) {
	var out []*entry
	var idx uint64
	for k, e := range st.kv {
		if strings.HasPrefix(k, prefix) {
			out = append(out, e)
			idx = max(idx, e.ModifyIndex)
		}
	}
	for k, i := range st.tombs {
		if strings.HasPrefix(k, prefix) {
			idx = max(idx, i)
		}
	}
	if prefix == "" || idx == 0 {
		idx = st.kvTableIndexLocked()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, idx
}

// acquireLocked is Consul's kvsLockTxn after its leader-side lock-delay
// check: it returns (false, nil) when another session holds key, an error
// when sess does not exist.
func (st *store) acquireLocked(e *entry) (bool, error) {
	if _, ok := st.sessions[e.Session]; !ok {
		return false, errInvalidSession(e.Session)
	}
	if old := st.kv[e.Key]; old != nil {
		switch old.Session {
		case e.Session:
			e.LockIndex = old.LockIndex
		case "":
			e.LockIndex = old.LockIndex + 1
		default:
			return false, nil
		}
	} else {
		e.LockIndex = 1
	}
	st.setLocked(e, true)
	return true, nil
}

// releaseLocked is Consul's kvsUnlockTxn.
func (st *store) releaseLocked(e *entry) bool {
	old := st.kv[e.Key]
	if old == nil || old.Session != e.Session {
		return false
	}
	e.Session = ""
	e.LockIndex = old.LockIndex
	st.setLocked(e, true)
	return true
}

// lockDelayedLocked reports whether key is under a lock-delay now.
func (st *store) lockDelayedLocked(key string) bool {
	until, ok := st.delays[key]
	if !ok {
		return false
	}
	if !st.cfg.clock.Now().Before(until) {
		delete(st.delays, key)
		return false
	}
	return true
}

// createSessionLocked stores s with a fresh index and arms its TTL timer.
func (st *store) createSessionLocked(s *session) {
	idx := st.nextIndexLocked()
	s.CreateIndex, s.ModifyIndex = idx, idx
	st.sessions[s.ID] = s
	st.armLocked(s)
	st.sessionsChangedLocked(idx)
}

// armLocked (re)starts the TTL of s from now: the server invalidates it
// after TTL × multiplier without a renewal.
func (st *store) armLocked(s *session) {
	if s.ttl == 0 || st.stopped {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	d := s.ttl * time.Duration(st.cfg.multiplier)
	s.expires = st.cfg.clock.Now().Add(d)
	s.timer = st.cfg.clock.AfterFunc(d, st.expireDue)
}

// expireDue invalidates the sessions whose TTL has run out.
func (st *store) expireDue() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expireDueLocked()
}

// expireDueLocked invalidates every session whose TTL has run out by the
// clock. Every request calls it first, so that right after a manual clock
// moves, the server answers as if its timers had already fired (they run in
// goroutines of their own and may lag behind).
func (st *store) expireDueLocked() {
	now := st.cfg.clock.Now()
	for _, id := range st.sessionIDsLocked() {
		s := st.sessions[id]
		if !s.expires.IsZero() && !now.Before(s.expires) {
			st.invalidateAtLocked(id, s.expires)
		}
	}
}

// invalidateLocked destroys session id as Consul's deleteSessionTxn: in one
// write, its locks are released (Behavior "release", LockIndex kept) or its
// keys deleted (Behavior "delete"), and each key gets the session's
// lock-delay (capped at MaxLockDelay) from now.
func (st *store) invalidateLocked(id string) bool {
	return st.invalidateAtLocked(id, st.cfg.clock.Now())
}

// invalidateAtLocked invalidates session id as of now: the lock-delays
// start then. A session found expired late (the request that noticed came
// after its timer's time) is invalidated as of its expiry, as Consul's
// timer would have done.
func (st *store) invalidateAtLocked(id string, now time.Time) bool {
	s, ok := st.sessions[id]
	if !ok {
		return false
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	delete(st.sessions, id)
	idx := st.nextIndexLocked()
	delay := min(s.LockDelay, MaxLockDelay)
	for _, k := range st.sortedKeysLocked() {
		e := st.kv[k]
		if e.Session != id {
			continue
		}
		if s.Behavior == behaviorDelete {
			st.deleteLocked(k, idx)
		} else {
			c := *e
			c.Session, c.ModifyIndex = "", idx
			st.kv[k] = &c
			st.kvChangedLocked(k, idx)
		}
		if delay > 0 {
			st.delays[k] = now.Add(delay)
		}
	}
	st.sessionsChangedLocked(idx)
	return true
}

func (st *store) sortedKeysLocked() []string {
	keys := make([]string, 0, len(st.kv))
	for k := range st.kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (st *store) sessionIDsLocked() []string {
	ids := make([]string, 0, len(st.sessions))
	for id := range st.sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
