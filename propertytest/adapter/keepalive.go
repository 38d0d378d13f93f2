package adapter

import (
	"sync"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// KeepAlive calls renew every period of clock (counted from the return of
// the previous call), until the returned stop is called, for a waiter
// whose session must be kept alive while the library waits (go-zookeeper's
// pings, Consul's session renewer, on the run's clock instead of the wall
// clock). stop waits for a renewal in flight and returns the moment the
// last successful renewal began, or since when none succeeded: a lower
// bound of the session's last renewal on the backend, when since is one of
// its creation. A period of zero or less renews nothing.
func KeepAlive(clock locks.Clock, period time.Duration, since time.Time, renew func() error) (stop func() time.Time) {
	stopc, done := make(chan struct{}), make(chan struct{})
	last := since
	go func() {
		defer close(done)
		if period <= 0 {
			<-stopc
			return
		}
		for {
			t := clock.NewTimer(period)
			select {
			case <-stopc:
				t.Stop()
				return
			case <-t.C():
			}
			began := clock.Now()
			if renew() == nil {
				last = began
			}
		}
	}()
	var once sync.Once
	return func() time.Time {
		once.Do(func() { close(stopc) })
		<-done
		return last
	}
}
