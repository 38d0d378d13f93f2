package redisfake

import (
	"context"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/fakeutil"
)

// DialContext connects to the server, whatever network and addr say, as
// the fake's own clients do: in memory on miniredis (a stopped server
// refuses, as a closed port), TCP to Addr on a real server. Hand it to a
// library that builds its go-redis client from an address (its Dialer),
// through Conns.Dial to make its connections severable.
func (r *Server) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return fakeutil.Target{InMemory: r.inMemory(), Addr: r.addr}.Dial(ctx, network, addr)
}

// inMemory is dialInMemory on miniredis, nil on a real server.
func (r *Server) inMemory() fakes.DialFunc {
	if r.mini == nil {
		return nil
	}
	return r.dialInMemory
}

// NewClientThrough is NewClient with every connection dialed through
// conns (DialContext wrapped by conns.Dial): after conns.Sever its
// commands fail and it cannot reconnect. Gated as NewClient's, closed by
// Close.
func (r *Server) NewClientThrough(conns *fakes.Conns) *redis.Client {
	opts := r.clientOptions()
	opts.Dialer = conns.Dial(r.DialContext)
	c := redis.NewClient(opts)
	Gate(c, r.GateLabel())
	return r.keep(c)
}
