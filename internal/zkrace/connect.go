package zkrace

import (
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Connect connects to the ZooKeeper servers addrs with a session timeout
// of session and the options opts (zk.WithDialer, zk.WithLogger, …; not
// zk.WithEventCallback, which Connect sets), waits up to timeout for the
// session, and then Settles: a connection ready for requests. It closes
// the connection it gave up on. onEvent, if not nil, is called with every
// event of the connection, on go-zookeeper's goroutine, as
// zk.WithEventCallback's callback would be.
func Connect(addrs []string, session, timeout time.Duration, onEvent func(zk.Event), opts ...func(*zk.Conn)) (*zk.Conn, error) {
	up := make(chan struct{})
	var once sync.Once
	conn, _, err := zk.Connect(addrs, session, func(c *zk.Conn) {
		for _, o := range opts {
			o(c)
		}
		zk.WithEventCallback(func(e zk.Event) {
			if e.Type == zk.EventSession && e.State == zk.StateHasSession {
				once.Do(func() { close(up) })
			}
			if onEvent != nil {
				onEvent(e)
			}
		})(c)
	})
	if err != nil {
		return nil, fmt.Errorf("ZooKeeper client: %w", err)
	}
	select {
	case <-up:
	case <-time.After(timeout):
		conn.Close()
		return nil, fmt.Errorf("no ZooKeeper session from %v within %v", addrs, timeout)
	}
	Settle(timeout)
	return conn, nil
}
