package locks

import (
	"crypto/rand"
	"encoding/hex"
)

// NewOwner returns a fresh random owner value (128 bits from crypto/rand, in
// hex). Every acquisition gets its own, so a lease can be told apart from
// every other lease of the same lock, in this process or any other.
func NewOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}
