package zklock

import (
	"testing"

	"github.com/lockproof/lockproof/fakes"
)

// TestMain fails the package if a test leaves a goroutine behind:
// go-zookeeper runs several per connection, so every test closes each
// connection it opens, and every lease ends before its test does.
func TestMain(m *testing.M) { fakes.VerifyNoLeaks(m) }
