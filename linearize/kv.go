package linearize

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
)

// KVOp is the kind of a key-value operation.
type KVOp uint8

const (
	// Get returns the key's value ("" if never written).
	Get KVOp = iota + 1
	// Put sets the key's value.
	Put
	// Append appends to the key's value.
	Append
)

var kvOpNames = [...]string{Get: "get", Put: "put", Append: "append"}

// String returns "get", "put" or "append".
func (o KVOp) String() string {
	if o >= Get && o <= Append {
		return kvOpNames[o]
	}
	return fmt.Sprintf("KVOp(%d)", uint8(o))
}

// MarshalText encodes the op as its name.
func (o KVOp) MarshalText() ([]byte, error) {
	if o < Get || o > Append {
		return nil, fmt.Errorf("linearize: invalid kv op %d", uint8(o))
	}
	return []byte(kvOpNames[o]), nil
}

// UnmarshalText decodes "get", "put" or "append".
func (o *KVOp) UnmarshalText(b []byte) error {
	for i := Get; i <= Append; i++ {
		if string(b) == kvOpNames[i] {
			*o = i
			return nil
		}
	}
	return fmt.Errorf("linearize: unknown kv op %q (want get, put or append)", b)
}

// KVInput is a call on a string key-value store.
type KVInput struct {
	// Op is Get, Put or Append.
	Op KVOp `json:"op"`
	// Key is the key: the partition key of NewKVModel.
	Key string `json:"key"`
	// Value is the value put or appended.
	Value string `json:"value"`
}

// KVOutput is what a key-value call returned.
type KVOutput struct {
	// Value is the value a Get returned.
	Value string `json:"value"`
}

func describeKV(op *Operation[KVInput, KVOutput]) string {
	in := op.Input
	switch {
	case in.Op == Get && op.Unknown:
		return fmt.Sprintf("get(%q) -> ?", in.Key)
	case in.Op == Get:
		return fmt.Sprintf("get(%q) -> %q", in.Key, op.Output.Value)
	}
	return fmt.Sprintf("%s(%q, %q)%s", in.Op, in.Key, in.Value, unknownMark(op.Unknown))
}

func kvReadOnly(op *Operation[KVInput, KVOutput]) bool { return op.Input.Op == Get }

// NewKVModel returns the model of a linearizable string key-value store,
// partitioned by key (the state is one key's value): Get returns the value,
// "" before any write; Put replaces it; Append concatenates to it. These are
// the semantics of porcupine's key-value test model. An unknown Put or
// Append may have taken effect; an unknown Get is skipped.
//
// The state is a KVValue, a value held as the chain of appends that built
// it, so that an Append step copies no bytes and hashes only what it
// appends.
func NewKVModel() Model[KVValue, KVInput, KVOutput] {
	return Model[KVValue, KVInput, KVOutput]{
		Init: func() KVValue { return KVValue{} },
		Step: func(dst []KVValue, s KVValue, op *Operation[KVInput, KVOutput]) []KVValue {
			switch op.Input.Op {
			case Get:
				if op.Unknown || s.Is(op.Output.Value) {
					return append(dst, s)
				}
			case Put:
				return append(dst, KVValueOf(op.Input.Value))
			case Append:
				return append(dst, s.Append(op.Input.Value))
			}
			return dst
		},
		Partition: func(in KVInput) string { return in.Key },
		ReadOnly:  kvReadOnly,
		ReadHash: func(op *Operation[KVInput, KVOutput]) (uint64, bool) {
			return kvHashOf(op.Output.Value), op.Input.Op == Get
		},
		Equal:             func(a, b KVValue) bool { return a.Equal(b) },
		Hash:              func(s KVValue) uint64 { return s.Hash() },
		DescribeOperation: describeKV,
		DescribeState:     func(s KVValue) string { return fmt.Sprintf("%q", s.String()) },
	}
}

// KVValue is an immutable string, the state of NewKVModel, kept as the
// chain of appends that built it: Append allocates one small node, however
// long the value, and the hash is updated from the appended bytes alone.
// The zero KVValue is "".
type KVValue struct{ n *kvNode }

// kvNode is a value: prev's value followed by suf (suf alone if prev is
// nil), n bytes in all, with hash its polynomial hash.
type kvNode struct {
	prev *kvNode
	suf  string
	n    int
	hash uint64
}

// kvHashMul is the multiplier of KVValue's polynomial hash (odd).
const kvHashMul = 0x100000001b3

// Powers of kvHashMul modulo 2^64, for kvRoll's four bytes at a time
// (TestKVRoll checks them).
const (
	kvHashMul2 = 0x366000002e329
	kvHashMul3 = 0x8a97b0004e7feab
	kvHashMul4 = 0x9ffaac085635bc91
)

// kvRoll extends the polynomial hash h of a string by the bytes of v: for
// each byte c, h = (h + c + 1) * kvHashMul, taken four bytes at a time so
// that one multiplication per four bytes waits for the previous one.
func kvRoll(h uint64, v string) uint64 {
	i := 0
	for ; i+4 <= len(v); i += 4 {
		h = (h+uint64(v[i])+1)*kvHashMul4 + (uint64(v[i+1])+1)*kvHashMul3 +
			(uint64(v[i+2])+1)*kvHashMul2 + (uint64(v[i+3])+1)*kvHashMul
	}
	for ; i < len(v); i++ {
		h = (h + uint64(v[i]) + 1) * kvHashMul
	}
	return h
}

// kvHashOf is the Hash of the KVValue holding v.
func kvHashOf(v string) uint64 {
	if v == "" {
		return 0
	}
	return kvRoll(0, v)
}

// KVValueOf returns the KVValue holding v.
func KVValueOf(v string) KVValue { return KVValue{}.Append(v) }

// Append returns v's value followed by suf; v is unchanged.
func (v KVValue) Append(suf string) KVValue {
	if suf == "" {
		return v
	}
	return KVValue{&kvNode{prev: v.n, suf: suf, n: v.Len() + len(suf), hash: kvRoll(v.Hash(), suf)}}
}

// Len is the length of the value in bytes.
func (v KVValue) Len() int {
	if v.n == nil {
		return 0
	}
	return v.n.n
}

// Hash is a hash of the value's bytes: equal values have equal hashes,
// however they were built.
func (v KVValue) Hash() uint64 {
	if v.n == nil {
		return 0
	}
	return v.n.hash
}

// String returns the value.
func (v KVValue) String() string {
	b := make([]byte, v.Len())
	for n, end := v.n, len(b); n != nil; n = n.prev {
		end -= copy(b[end-len(n.suf):end], n.suf)
	}
	return string(b)
}

// Is reports whether the value is s.
func (v KVValue) Is(s string) bool {
	if v.Len() != len(s) {
		return false
	}
	end := len(s)
	for n := v.n; n != nil; n = n.prev {
		if s[end-len(n.suf):end] != n.suf {
			return false
		}
		end -= len(n.suf)
	}
	return true
}

// Equal reports whether both values hold the same bytes, however they were
// built.
func (v KVValue) Equal(o KVValue) bool {
	a, b := v.n, o.n
	if a == b {
		return true
	}
	if v.Len() != o.Len() || v.Hash() != o.Hash() {
		return false
	}
	if a.prev == b.prev && a.suf == b.suf {
		return true
	}
	// Compare from the end, a chunk at a time: a[:ea] and b[:eb] are what
	// is left of the current nodes' suffixes.
	ea, eb := len(a.suf), len(b.suf)
	for rem := a.n; rem > 0; {
		if a == b && ea == eb {
			return true // the same bytes from here on back
		}
		for ea == 0 {
			a = a.prev
			ea = len(a.suf)
		}
		for eb == 0 {
			b = b.prev
			eb = len(b.suf)
		}
		k := min(ea, eb)
		if a.suf[ea-k:ea] != b.suf[eb-k:eb] {
			return false
		}
		ea, eb, rem = ea-k, eb-k, rem-k
	}
	return true
}

// KVMap is an immutable map from keys to values, the state of
// NewKVMapModel: pairs sorted by key in a small slice (cheap to copy and
// compare for the few keys of a test history) with an order-independent
// hash kept up to date by Set, so hashing a state is O(1). The zero KVMap is
// the empty map. Lookups are linear: it is meant for a few dozen keys.
type KVMap struct {
	pairs []kvPair
	hash  uint64
}

type kvPair struct{ key, value string }

// find returns the index of key, or where it would be inserted.
func (k KVMap) find(key string) (int, bool) {
	for i, p := range k.pairs {
		if p.key >= key {
			return i, p.key == key
		}
	}
	return len(k.pairs), false
}

// Get returns the value of key ("" if absent).
func (k KVMap) Get(key string) string {
	if i, ok := k.find(key); ok {
		return k.pairs[i].value
	}
	return ""
}

// Set returns a copy of k with key set to value; k is unchanged.
func (k KVMap) Set(key, value string) KVMap {
	i, ok := k.find(key)
	n := KVMap{hash: k.hash ^ pairHash(key, value)}
	if ok {
		n.pairs = slices.Clone(k.pairs)
		n.hash ^= pairHash(key, k.pairs[i].value)
		n.pairs[i].value = value
		return n
	}
	n.pairs = make([]kvPair, len(k.pairs)+1)
	copy(n.pairs, k.pairs[:i])
	n.pairs[i] = kvPair{key, value}
	copy(n.pairs[i+1:], k.pairs[i:])
	return n
}

// Len is the number of keys.
func (k KVMap) Len() int { return len(k.pairs) }

// Equal reports whether both maps hold the same pairs.
func (k KVMap) Equal(o KVMap) bool {
	if k.hash != o.hash || len(k.pairs) != len(o.pairs) {
		return false
	}
	for i := range k.pairs {
		if k.pairs[i] != o.pairs[i] {
			return false
		}
	}
	return true
}

// Hash is an order-independent hash of the pairs.
func (k KVMap) Hash() uint64 { return k.hash }

// String renders the map in key order.
func (k KVMap) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range k.pairs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %q", p.key, p.value)
	}
	b.WriteByte('}')
	return b.String()
}

func pairHash(key, value string) uint64 {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	h.WriteString(key)
	h.WriteByte(0)
	h.WriteString(value)
	return h.Sum64()
}

// NewKVMapModel is NewKVModel without partitioning: the state is the whole
// map, so the search sees every key at once. It exists to compare with
// porcupine's unpartitioned key-value model and to show what partitioning
// saves; prefer NewKVModel.
func NewKVMapModel() Model[KVMap, KVInput, KVOutput] {
	return Model[KVMap, KVInput, KVOutput]{
		Init: func() KVMap { return KVMap{} },
		Step: func(dst []KVMap, s KVMap, op *Operation[KVInput, KVOutput]) []KVMap {
			in := op.Input
			switch in.Op {
			case Get:
				if op.Unknown || op.Output.Value == s.Get(in.Key) {
					return append(dst, s)
				}
			case Put:
				return append(dst, s.Set(in.Key, in.Value))
			case Append:
				return append(dst, s.Set(in.Key, s.Get(in.Key)+in.Value))
			}
			return dst
		},
		ReadOnly:          kvReadOnly,
		Equal:             func(a, b KVMap) bool { return a.Equal(b) },
		Hash:              func(s KVMap) uint64 { return s.Hash() },
		DescribeOperation: describeKV,
		DescribeState:     func(s KVMap) string { return s.String() },
	}
}
