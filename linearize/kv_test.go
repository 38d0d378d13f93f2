package linearize

import (
	"math/rand/v2"
	"testing"
)

// TestKVValue builds values by random puts and appends of short strings
// (so that equal values are often built in different ways) and checks
// KVValue's String, Len, Is, Equal and Hash against plain strings.
func TestKVValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	pieces := []string{"", "a", "b", "ab", "ba", "aab", "\x00", "a\x00"}
	var vals []KVValue
	var strs []string
	vals, strs = append(vals, KVValue{}), append(strs, "")
	for range 3000 {
		i := rng.IntN(len(vals))
		p := pieces[rng.IntN(len(pieces))]
		var v KVValue
		var s string
		if rng.IntN(5) == 0 {
			v, s = KVValueOf(p), p
		} else {
			v, s = vals[i].Append(p), strs[i]+p
		}
		if len(s) > 12 {
			continue
		}
		vals, strs = append(vals, v), append(strs, s)
	}
	for i, v := range vals {
		if v.String() != strs[i] || v.Len() != len(strs[i]) || !v.Is(strs[i]) {
			t.Fatalf("value %d: String %q Len %d, want %q", i, v.String(), v.Len(), strs[i])
		}
	}
	equalPairs := 0
	for range 200000 {
		i, j := rng.IntN(len(vals)), rng.IntN(len(vals))
		want := strs[i] == strs[j]
		if got := vals[i].Equal(vals[j]); got != want {
			t.Fatalf("Equal(%q, %q) = %v", strs[i], strs[j], got)
		}
		if got := vals[i].Is(strs[j]); got != want {
			t.Fatalf("%q.Is(%q) = %v", strs[i], strs[j], got)
		}
		if want {
			equalPairs++
			if vals[i].Hash() != vals[j].Hash() {
				t.Fatalf("equal values %q with different hashes", strs[i])
			}
		}
	}
	if equalPairs < 1000 {
		t.Fatalf("only %d equal pairs compared", equalPairs)
	}
}

// TestKVModelStep checks NewKVModel's Step against porcupine's string
// semantics (pcKVStep) on random operations.
func TestKVModelStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	m := NewKVModel()
	words := []string{"", "x", "y", "xy"}
	for range 2000 {
		v, s := m.Init(), ""
		for range 12 {
			in := KVInput{Op: KVOp(rng.IntN(3) + 1), Key: "k", Value: words[rng.IntN(len(words))]}
			out := KVOutput{Value: s}
			if in.Op == Get && rng.IntN(2) == 0 {
				out.Value = words[rng.IntN(len(words))] + words[rng.IntN(len(words))]
			}
			op := &Operation[KVInput, KVOutput]{Input: in, Output: out}
			next := m.Step(nil, v, op)
			ok, ns := pcKVStep(s, pcKVIn{op: in.Op, key: in.Key, value: in.Value}, out.Value)
			if ok != (len(next) == 1) || len(next) > 1 {
				t.Fatalf("%v on %q: %d states, porcupine's model ok=%v", in, s, len(next), ok)
			}
			if !ok {
				continue
			}
			if next[0].String() != ns || m.Hash(next[0]) != m.Hash(KVValueOf(ns)) || !m.Equal(next[0], KVValueOf(ns)) {
				t.Fatalf("%v on %q: %q, want %q", in, s, next[0].String(), ns)
			}
			v, s = next[0], ns
		}
	}
}

// TestKVRoll checks that the hash does not depend on how a value is split
// into appends (kvRoll takes four bytes at a time).
func TestKVRoll(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	slow := func(h uint64, v string) uint64 {
		for i := 0; i < len(v); i++ {
			h = (h + uint64(v[i]) + 1) * kvHashMul
		}
		return h
	}
	for range 5000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		s := string(b)
		cut := rng.IntN(len(s) + 1)
		h0 := rng.Uint64()
		if got, want := kvRoll(kvRoll(h0, s[:cut]), s[cut:]), slow(h0, s); got != want {
			t.Fatalf("kvRoll of %q cut at %d: %x, want %x", s, cut, got, want)
		}
	}
}
