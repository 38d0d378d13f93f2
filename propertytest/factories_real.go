package propertytest

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
)

// RedisLockOn is the Factory of redislock on the real Redis server at addr,
// under a key prefix of its own that is deleted after every run. A real
// server keeps its own time, so the run does too: Clock is the system
// clock and Advance sleeps. Runs therefore last seconds (use a short
// Options.TTL, such as 200ms), and the lease model's clock tolerance
// (locks.Drift) must cover the difference between the server's clock rate
// and this machine's, which it does for a server on the same machine or
// one kept in step by NTP.
func RedisLockOn(addr string) Factory {
	return func(t testing.TB) (*Backend, error) {
		if addr == "" {
			return nil, fmt.Errorf("propertytest: RedisLockOn needs the server's address")
		}
		t.Setenv(fakes.EnvRedisAddr, addr)
		r := fakes.Redis(t)
		if !r.Real() {
			return nil, fmt.Errorf("propertytest: %s did not select the real server", fakes.EnvRedisAddr)
		}
		return &Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				return redislock.New(r.NewClient(), name, append(r.LockOptions(), opts...)...)
			},
			Clock:   locks.SystemClock{},
			Advance: time.Sleep,
		}, nil
	}
}
