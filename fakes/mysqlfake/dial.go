package mysqlfake

import (
	"context"
	"database/sql"
	"net"

	"github.com/go-sql-driver/mysql"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/fakeutil"
)

// DialContext connects to the server, whatever network and addr say, as
// the pools of OpenDB do: in memory on the in-process server, to the
// DSN's address on a real one. It fits go-sql-driver's Config.DialFunc
// (and mysql.RegisterDialContext, with the address dropped).
func (s *Server) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	target := fakeutil.Target{InMemory: s.inMemory()}
	if target.InMemory == nil {
		cfg, err := mysql.ParseDSN(s.dsn)
		if err != nil {
			return nil, err
		}
		target.Net, target.Addr = cfg.Net, cfg.Addr
	}
	return target.Dial(ctx, network, addr)
}

// inMemory is the in-process server's in-memory dial, nil on a real one.
func (s *Server) inMemory() fakes.DialFunc {
	if s.mem == nil {
		return nil
	}
	return s.mem.Dial
}

// OpenDBThrough is OpenDB with every connection dialed through conns:
// after conns.Sever its statements fail and it cannot reconnect. Gated
// as OpenDB's (GatedConnector), closed by Close.
func (s *Server) OpenDBThrough(conns *fakes.Conns) (*sql.DB, error) {
	return s.openDB(conns.Dial(s.DialContext))
}
