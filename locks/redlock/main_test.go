package redlock

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every
// Lock must close its subscriptions and readers before it returns.
//
// One go-redis goroutine is let through: after 10 failed dials to a stopped
// node (the default size of go-redis's separate pipeline pool, which the
// fakes' clients do not raise), a pool starts a prober that sleeps a second
// between dials and exits at its next wake-up once the client is closed. The
// fakes close every client at cleanup, but the prober may still be asleep
// when the last test ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
