package etcdlock

import (
	"testing"

	"github.com/lockproof/lockproof/fakes"
)

// TestMain fails the package if a test leaves a goroutine behind, allowing
// embedded etcd members' HTTP connections their read timeout (see
// fakes.VerifyNoLeaks).
func TestMain(m *testing.M) { fakes.VerifyNoLeaks(m) }
