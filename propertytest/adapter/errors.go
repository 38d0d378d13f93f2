package adapter

import (
	"fmt"

	"github.com/lockproof/lockproof/locks"
)

// Locked wraps err, the library lib's answer that another owner holds
// the lock, in locks.ErrLocked; errors.Is and errors.As still find err.
func Locked(lib string, err error) error { return mapped(lib, locks.ErrLocked, err) }

// NotHeld wraps err, the library lib's answer that the caller no longer
// holds the lock, in locks.ErrNotHeld; errors.Is and errors.As still find
// err.
func NotHeld(lib string, err error) error { return mapped(lib, locks.ErrNotHeld, err) }

// mapped wraps err in sentinel, or returns sentinel alone when err is nil.
func mapped(lib string, sentinel, err error) error {
	if err == nil {
		return fmt.Errorf("%s: %w", lib, sentinel)
	}
	return fmt.Errorf("%s: %w: %w", lib, sentinel, err)
}
