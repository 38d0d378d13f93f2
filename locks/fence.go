package locks

import (
	"fmt"
	"sync"
)

// Fence is an in-memory resource guarded by fencing tokens: it holds one
// value of type V and admits a read or a write only with a token at least as
// high as the highest it has seen. Reads count: once a new holder has read
// with a higher token, a stale holder can no longer write back a value it read
// earlier, so a read-modify-write done under a lock loses no update even when
// the lock fails to exclude a paused holder. Safe for concurrent use; the
// zero value is ready, holding V's zero value.
type Fence[V any] struct {
	mu       sync.Mutex
	value    V
	highest  Token
	seen     bool
	accepted uint64
	rejected uint64
}

// FenceStats counts what a Fence admitted and refused.
type FenceStats struct {
	Accepted, Rejected uint64
}

func (f *Fence[V]) admitLocked(t Token) error {
	if f.seen && t < f.highest {
		f.rejected++
		return fmt.Errorf("%w: %v < %v", ErrStaleToken, t, f.highest)
	}
	f.highest, f.seen = t, true
	f.accepted++
	return nil
}

// Admit records t as seen, or returns ErrStaleToken if a higher token was
// seen before. Use it to guard a resource other than the Fence's own value.
func (f *Fence[V]) Admit(t Token) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.admitLocked(t)
}

// Read returns the value if t is not stale.
func (f *Fence[V]) Read(t Token) (V, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.admitLocked(t); err != nil {
		var zero V
		return zero, err
	}
	return f.value, nil
}

// Write stores v if t is not stale.
func (f *Fence[V]) Write(t Token, v V) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.admitLocked(t); err != nil {
		return err
	}
	f.value = v
	return nil
}

// Value returns the value without a token, for assertions after the fact.
func (f *Fence[V]) Value() V {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.value
}

// Highest returns the highest token seen; ok is false before the first.
func (f *Fence[V]) Highest() (t Token, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.highest, f.seen
}

// Stats returns how many reads and writes were admitted and refused.
func (f *Fence[V]) Stats() FenceStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FenceStats{Accepted: f.accepted, Rejected: f.rejected}
}
