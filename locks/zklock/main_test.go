package zklock

import (
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/internal/locktest"
)

// TestMain fails the package if a test leaves a goroutine behind:
// go-zookeeper runs several per connection, so every test closes each
// connection it opens, and every lease ends before its test does. The
// tests that wait for a session to expire or a connection to come back, in
// wall time, run in parallel, each on a prefix of its own.
func TestMain(m *testing.M) {
	locktest.WaitingParallel(8)
	fakes.VerifyNoLeaks(m)
}
