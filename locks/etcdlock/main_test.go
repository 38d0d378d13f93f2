package etcdlock

import (
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/internal/locktest"
)

// TestMain fails the package if a test leaves a goroutine behind, allowing
// embedded etcd members' HTTP connections their read timeout (see
// fakes.VerifyNoLeaks). The tests that wait for a lease to expire or a
// cluster to elect a leader, in wall time, run in parallel, each on an
// embedded server of its own.
func TestMain(m *testing.M) {
	locktest.WaitingParallel(4)
	fakes.VerifyNoLeaks(m)
}
