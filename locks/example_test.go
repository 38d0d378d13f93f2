package locks_test

import (
	"errors"
	"fmt"

	"github.com/lockproof/lockproof/locks"
)

// A Fence refuses a write from a holder whose token is older than one it has
// already seen: the paused holder with token 1 cannot overwrite the work of
// the holder with token 2.
func ExampleFence() {
	var account locks.Fence[int]

	stale, _ := account.Read(1) // holder 1 reads, then pauses past its TTL
	cur, _ := account.Read(2)   // holder 2 got the lock and reads
	_ = account.Write(2, cur+100)

	err := account.Write(1, stale+10) // holder 1 wakes up and writes back
	fmt.Println(errors.Is(err, locks.ErrStaleToken), account.Value())
	// Output: true 100
}
