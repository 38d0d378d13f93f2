package zkfake

import (
	"context"
	"net"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/fakeutil"
)

// DialContext connects to the server, whatever network and addr say: in
// memory on minizk (minizk.Server.DialInMemory), TCP to Addr on a real
// server. go-zookeeper takes a dialer of another shape: see
// ConnectThrough, or adapt it in zk.WithDialer.
func (z *Server) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	target := fakeutil.Target{Addr: z.addr}
	if z.mini != nil {
		target.InMemory = func(context.Context, string, string) (net.Conn, error) { return z.mini.DialInMemory() }
	}
	return target.Dial(ctx, network, addr)
}

// ConnectThrough is Connect with every connection dialed through conns
// (DialContext, within go-zookeeper's connect timeout): after conns.Sever
// the client loses its connection and cannot reconnect, so its session
// expires on the server as a crashed process's does. Like Connect's, its
// requests are not gated.
func (z *Server) ConnectThrough(conns *fakes.Conns, sessionTimeout time.Duration) (*zk.Conn, <-chan zk.Event, error) {
	dial := conns.Dial(z.DialContext)
	return z.connect(z.addr, sessionTimeout, zk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return dial(ctx, network, address)
	}))
}
