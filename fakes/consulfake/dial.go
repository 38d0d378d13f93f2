package consulfake

import (
	"context"
	"net"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/fakeutil"
)

// DialContext connects to the server, whatever network and addr say, as
// the fake's own clients do: in memory on miniconsul, TCP to Addr on a
// real agent. Hand it to the http.Transport of a client a library builds,
// and gate that transport with GateTransport.
func (c *Server) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return fakeutil.Target{InMemory: c.inMemory(), Addr: c.addr}.Dial(ctx, network, addr)
}

// inMemory is miniconsul's in-memory dial (miniconsul.Server.DialInMemory),
// nil on a real agent.
func (c *Server) inMemory() fakes.DialFunc {
	if c.mini == nil {
		return nil
	}
	return c.mini.DialInMemory
}

// NewClientThrough is NewClient with every connection dialed through
// conns: after conns.Sever its requests fail and it cannot reconnect.
// Gated as NewClient's; its idle connections are closed by Close.
func (c *Server) NewClientThrough(conns *fakes.Conns) *api.Client {
	c.owner.Helper()
	client, err := c.newClientDialing(conns.Dial(c.DialContext))
	if err != nil {
		c.owner.Fatalf("consulfake: %v", err)
	}
	return client
}
