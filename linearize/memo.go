package linearize

import (
	"math/bits"
	"unsafe"
)

// The search works on state ids, not states: every distinct state reached is
// stored once (interned), the result of each Step is cached per (state id,
// operation), and the memo of explored configurations holds a bitset and a
// state id. Comparing two configurations is then integer work; a model's
// Step, Hash and Equal run once per distinct transition or state; and the
// memory held grows with the configurations, not with the states' size.

// table is an open-addressing hash set of entry indices (index + 1; 0 is an
// empty slot), kept at most half full.
type table struct {
	slots []uint32
}

// newTable returns a table sized for about n entries.
func newTable(n int) table {
	return table{slots: make([]uint32, tableSize(n))}
}

// tableSize is the number of slots of a table for about n entries.
func tableSize(n int) int {
	size := 16
	for size < 2*n {
		size *= 2
	}
	return size
}

// reset empties the table and sizes it for about n entries, keeping its
// slots unless they are far too many (what clearing them costs is then
// more than growing a table again would).
func (t *table) reset(n int) {
	want := tableSize(n)
	if l := len(t.slots); l >= want && (l <= 64*want || l <= 1<<18) {
		clear(t.slots)
		return
	}
	*t = newTable(n)
}

func (t *table) mask() uint64 { return uint64(len(t.slots) - 1) }

// rehash doubles the slots; hashOf returns the hash of entry e.
func (t *table) rehash(n int, hashOf func(e int) uint64) {
	slots := make([]uint32, 2*len(t.slots))
	mask := uint64(len(slots) - 1)
	for e := range n {
		i := hashOf(e) & mask
		for slots[i] != 0 {
			i = (i + 1) & mask
		}
		slots[i] = uint32(e + 1)
	}
	t.slots = slots
}

// interner stores each distinct state once and names it by its index.
type interner[S any] struct {
	t      table
	states chunked[S]
	hashes chunked[uint32] // the high half of each state's mixed hash
	hash   func(S) uint64
	equal  func(a, b S) bool
}

// chunked is an append-only array stored in chunks of doubling size (32,
// 64, 128, ...): growing it never copies, and it allocates at most twice
// what it holds, where a slice grown by append allocates several times.
type chunked[T any] struct {
	chunks [][]T
	n      int
}

// chunkOf returns the chunk and offset of element i.
func chunkOf(i int) (int, int) {
	j := uint(i) + 32
	c := bits.Len(j) - 6
	return c, int(j - 32<<c)
}

func (c *chunked[T]) at(i int) *T {
	k, off := chunkOf(i)
	return &c.chunks[k][off]
}

func (c *chunked[T]) push(v T) {
	k, off := chunkOf(c.n)
	if k == len(c.chunks) {
		c.chunks = append(c.chunks, make([]T, 32<<k))
	}
	c.chunks[k][off] = v
	c.n++
}

// reset empties c, keeping its chunks; it clears the elements it held so
// that they keep nothing alive.
func (c *chunked[T]) reset() {
	for k := 0; c.n > 0 && k < len(c.chunks); k++ {
		used := min(c.n, len(c.chunks[k]))
		clear(c.chunks[k][:used])
		c.n -= used
	}
	c.n = 0
}

// capacity is the number of elements allocated.
func (c *chunked[T]) capacity() int { return 32<<len(c.chunks) - 32 }

// id returns the id of s, adding it if new.
func (in *interner[S]) id(s S) uint32 {
	// Slots are placed by the high half of the hash, the half kept.
	h := stateHash(in.hash(s))
	i := uint64(h) & in.t.mask()
	for {
		e := in.t.slots[i]
		if e == 0 {
			break
		}
		if *in.hashes.at(int(e - 1)) == h && in.equal(*in.states.at(int(e - 1)), s) {
			return e - 1
		}
		i = (i + 1) & in.t.mask()
	}
	in.states.push(s)
	in.hashes.push(h)
	n := in.states.n
	in.t.slots[i] = uint32(n)
	if 2*n > len(in.t.slots) {
		in.t.rehash(n, func(e int) uint64 { return uint64(*in.hashes.at(e)) })
	}
	return uint32(n - 1)
}

// reset empties the interner and sizes its table for about n states.
func (in *interner[S]) reset(n int) {
	in.t.reset(n)
	in.states.reset()
	in.hashes.reset()
}

// stateHash is the part of a model's hash of a state that the interner
// keeps.
func stateHash(h uint64) uint32 { return uint32(mix(h) >> 32) }

// hashOf returns the kept hash of the state of an id.
func (in *interner[S]) hashOf(id uint32) uint32 { return *in.hashes.at(int(id)) }

// state returns the state of an id.
func (in *interner[S]) state(id uint32) S { return *in.states.at(int(id)) }

func (in *interner[S]) footprint() int64 {
	var zero S
	return int64(in.states.capacity())*(int64(unsafe.Sizeof(zero))+4) + int64(len(in.t.slots))*4
}

// transitions caches the state ids each (state id, operation) steps to.
type transitions struct {
	t    table
	keys []uint64 // state id << 32 | local operation
	span []uint32 // entry e's ids are ids[span[2e]:span[2e+1]]
	ids  []uint32
}

func transKey(state uint32, op int32) uint64 { return uint64(state)<<32 | uint64(uint32(op)) }

// get returns the cached ids, if any.
func (tr *transitions) get(key uint64) ([]uint32, bool) {
	h := mix(key)
	i := h & tr.t.mask()
	for {
		e := tr.t.slots[i]
		if e == 0 {
			return nil, false
		}
		if tr.keys[e-1] == key {
			return tr.ids[tr.span[2*(e-1)]:tr.span[2*(e-1)+1]], true
		}
		i = (i + 1) & tr.t.mask()
	}
}

// put caches ids under key (absent) and returns the stored copy.
func (tr *transitions) put(key uint64, ids []uint32) []uint32 {
	h := mix(key)
	i := h & tr.t.mask()
	for tr.t.slots[i] != 0 {
		i = (i + 1) & tr.t.mask()
	}
	lo := uint32(len(tr.ids))
	tr.ids = append(tr.ids, ids...)
	tr.keys = append(tr.keys, key)
	tr.span = append(tr.span, lo, uint32(len(tr.ids)))
	tr.t.slots[i] = uint32(len(tr.keys))
	if 2*len(tr.keys) > len(tr.t.slots) {
		tr.t.rehash(len(tr.keys), func(e int) uint64 { return mix(tr.keys[e]) })
	}
	return tr.ids[lo:]
}

func (tr *transitions) footprint() int64 {
	return int64(cap(tr.keys))*8 + int64(cap(tr.span))*4 + int64(cap(tr.ids))*4 + int64(len(tr.t.slots))*4
}

// memo is the set of explored configurations (linearized set, state id).
// An entry is stride words: its key (unless the memo is windowed), a tag
// (the state id, and where the stored words start in the set), the words
// of the set.
type memo struct {
	// keyed holds each entry's index + 1 in the low half of a slot and the
	// high half of its key in the other: probes compare that half before
	// reading an entry, and growing reads no entry.
	keyed  []uint64
	words  int
	head   int        // 2: key and tag; 1: tag only
	chunks [][]uint64 // chunk c holds 32<<c entries
	n      int
}

// reset empties the memo for configurations of words-word bitsets, sized
// for about n entries, with keys in the entries unless windowed (the
// slots hold half of each key: a windowed memo, whose entries are short,
// keeps no other copy). Chunks big enough for the new stride are kept.
func (m *memo) reset(n, words int, windowed bool) {
	m.words, m.n, m.head = words, 0, 2
	if windowed {
		m.head = 1
	}
	want := tableSize(n)
	if l := len(m.keyed); l >= want && (l <= 64*want || l <= 1<<17) {
		clear(m.keyed)
	} else {
		m.keyed = make([]uint64, want)
	}
	for k, c := range m.chunks {
		if len(c) < (32<<k)*m.stride() {
			m.chunks = m.chunks[:k]
			break
		}
	}
}

func (m *memo) stride() int { return m.head + m.words }

func (m *memo) entry(e int) []uint64 {
	k, off := chunkOf(e)
	st := m.stride()
	return m.chunks[k][off*st : (off+1)*st]
}

// same reports whether entry rec is (key, tag, set).
func (m *memo) same(rec []uint64, key uint64, set []uint64, tag uint64) bool {
	if m.head == 1 {
		return rec[0] == tag && sameWords(rec[1:], set)
	}
	return rec[0] == key && rec[1] == tag && sameWords(rec[2:], set)
}

// insert adds (set, tag) under key and reports whether it was new. set has
// the memo's words; key must be a function of (set, tag). Slots are placed
// by the high half of the key, the half they hold.
func (m *memo) insert(key uint64, set []uint64, tag uint64) bool {
	hi := key >> 32
	mask := uint64(len(m.keyed) - 1)
	i := hi & mask
	for {
		sl := m.keyed[i]
		if sl == 0 {
			break
		}
		if sl>>32 == hi && m.same(m.entry(int(uint32(sl)-1)), key, set, tag) {
			return false
		}
		i = (i + 1) & mask
	}
	k, _ := chunkOf(m.n)
	if k == len(m.chunks) {
		m.chunks = append(m.chunks, make([]uint64, (32<<k)*m.stride()))
	}
	rec := m.entry(m.n)
	if m.head == 1 {
		rec[0] = tag
	} else {
		rec[0], rec[1] = key, tag
	}
	copy(rec[m.head:], set)
	m.n++
	m.keyed[i] = uint64(m.n) | hi<<32
	if 2*m.n > len(m.keyed) {
		slots := make([]uint64, 2*len(m.keyed))
		mask := uint64(len(slots) - 1)
		for _, sl := range m.keyed {
			if sl == 0 {
				continue
			}
			j := sl >> 32 & mask
			for slots[j] != 0 {
				j = (j + 1) & mask
			}
			slots[j] = sl
		}
		m.keyed = slots
	}
	return true
}

func sameWords(a, b []uint64) bool {
	for i, w := range b {
		if a[i] != w {
			return false
		}
	}
	return true
}

func (m *memo) footprint() int64 {
	n := int64(len(m.keyed)) * 8
	for _, c := range m.chunks {
		n += int64(len(c)) * 8
	}
	return n
}
