package etcdfake

import (
	"context"
	"fmt"
	"net"
	"net/url"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/fakeutil"
)

// DialContext connects over TCP to addr, which must be the host:port of
// one of the server's endpoints (Endpoints; the embedded members listen
// on loopback TCP), as gRPC asks for each endpoint. Wrapped by Conns.Dial
// and adapted to grpc.WithContextDialer, it makes a client's connections
// severable; see NewClientThrough.
func (s *Server) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	for _, ep := range s.Endpoints() {
		host := ep
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			host = u.Host
		}
		if host == addr {
			return fakeutil.DialTCP(ctx, addr)
		}
	}
	return nil, fmt.Errorf("etcdfake: %q is not an endpoint of the etcd server %v", addr, s.Endpoints())
}

// NewClientThrough is NewClient with every connection dialed through
// conns: after conns.Sever its requests and its leases' keep-alives fail
// and it cannot reconnect. Gated as NewClient's, closed by Close.
func (s *Server) NewClientThrough(conns *fakes.Conns, dialOpts ...grpc.DialOption) *clientv3.Client {
	dial := conns.Dial(s.DialContext)
	withDialer := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return dial(ctx, "tcp", addr)
	})
	return s.NewClient(append([]grpc.DialOption{withDialer}, dialOpts...)...)
}
