package consulfake

import (
	"context"
	"net"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/fakeutil"
)

// DialContext connects to the server, whatever network and addr say, as
// the fake's own clients do: in memory on miniconsul
// (miniconsul.Server.DialInMemory), TCP to Addr on a real agent. Hand it
// to an http.Transport (DialContext) of a client a library builds, and
// gate that transport with GateTransport.
func (c *Server) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.mini != nil {
		return c.mini.DialInMemory(ctx, network, addr)
	}
	return fakeutil.DialTCP(ctx, c.addr)
}

// NewClientThrough is NewClient with every connection dialed through
// conns: after conns.Sever its requests fail and it cannot reconnect.
// Gated as NewClient's; its idle connections are closed by Close.
func (c *Server) NewClientThrough(conns *fakes.Conns) *api.Client {
	c.owner.Helper()
	client, err := c.newClientDialing(conns.Dial(c.DialContext))
	if err != nil {
		c.owner.Fatalf("fakes: %v", err)
	}
	return client
}
