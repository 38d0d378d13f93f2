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
func NewKVModel() Model[string, KVInput, KVOutput] {
	return Model[string, KVInput, KVOutput]{
		Init: func() string { return "" },
		Step: func(dst []string, s string, op *Operation[KVInput, KVOutput]) []string {
			switch op.Input.Op {
			case Get:
				if op.Unknown || op.Output.Value == s {
					return append(dst, s)
				}
			case Put:
				return append(dst, op.Input.Value)
			case Append:
				return append(dst, s+op.Input.Value)
			}
			return dst
		},
		Partition:         func(in KVInput) string { return in.Key },
		ReadOnly:          kvReadOnly,
		Equal:             func(a, b string) bool { return a == b },
		Hash:              func(s string) uint64 { return maphash.String(hashSeed, s) },
		DescribeOperation: describeKV,
		DescribeState:     func(s string) string { return fmt.Sprintf("%q", s) },
	}
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
