package fakes_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/hashicorp/consul/api"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/internal/memnet"
)

// tcpDial dials addr over TCP whatever a client asks for: a library's
// client of a server on a loopback port.
func tcpDial(addr string) fakes.DialFunc {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// TestConnsSever: Sever closes what was dialed (the peer reads the end),
// forgets it, and refuses later dials with ErrSevered; a connection closed
// before is forgotten; a nil dial function is an error, not a panic.
func TestConnsSever(t *testing.T) {
	conns := fakes.NewConns()
	var peers []net.Conn
	dial := conns.Dial(func(context.Context, string, string) (net.Conn, error) {
		a, b := memnet.Pipe("client", "server")
		peers = append(peers, b)
		return a, nil
	})
	first, err := dial(context.Background(), "tcp", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dial(context.Background(), "tcp", "x"); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if n := conns.Open(); n != 1 {
		t.Fatalf("Open = %d after one of two connections closed, want 1", n)
	}
	conns.Sever()
	if n := conns.Open(); n != 0 || !conns.Severed() {
		t.Fatalf("after Sever: Open %d, Severed %v", n, conns.Severed())
	}
	if _, err := peers[1].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the peer of a severed connection reads %v, want EOF", err)
	}
	if _, err := dial(context.Background(), "tcp", "x"); !errors.Is(err, fakes.ErrSevered) {
		t.Fatalf("a dial after Sever: %v, want ErrSevered", err)
	}
	if _, err := fakes.NewConns().Dial(nil)(context.Background(), "tcp", "x"); err == nil {
		t.Fatal("a nil dial function dialed")
	}
}

// TestConnsSeverRedis: a go-redis client whose connections go through a
// Conns, in memory (NewClientThrough) and over TCP (a client a library
// builds from the address), fails its next command after Sever, and its
// reconnection fails with ErrSevered.
func TestConnsSeverRedis(t *testing.T) {
	s := fakes.Redis(t)
	ctx := context.Background()
	clients := map[string]func(*fakes.Conns) *redis.Client{
		"in memory": s.NewClientThrough,
		"tcp": func(c *fakes.Conns) *redis.Client {
			cl := redis.NewClient(&redis.Options{Addr: s.Addr(), Dialer: c.Dial(tcpDial(s.Addr())), DisableIdentity: true, MaxRetries: -1})
			t.Cleanup(func() { _ = cl.Close() })
			return cl
		},
	}
	for name, newClient := range clients {
		t.Run(name, func(t *testing.T) {
			conns := fakes.NewConns()
			c := newClient(conns)
			if err := c.Set(ctx, s.Prefix()+"k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if conns.Open() == 0 {
				t.Fatal("the client's connection is not tracked")
			}
			conns.Sever()
			if err := c.Get(ctx, s.Prefix()+"k").Err(); err == nil {
				t.Fatal("a command after Sever succeeded")
			}
			if err := c.Get(ctx, s.Prefix()+"k").Err(); !errors.Is(err, fakes.ErrSevered) {
				t.Fatalf("a reconnection after Sever: %v, want ErrSevered", err)
			}
			if err := s.NewClient().Get(ctx, s.Prefix()+"k").Err(); err != nil {
				t.Fatalf("another client after Sever: %v", err)
			}
		})
	}
}

// TestConnsSeverConsul: an api.Client whose connections go through a
// Conns, in memory and over TCP, fails after Sever with ErrSevered.
func TestConnsSeverConsul(t *testing.T) {
	s := fakes.Consul(t, fakes.ForceMiniconsul())
	clients := map[string]func(*fakes.Conns) *api.Client{
		"in memory": s.NewClientThrough,
		"tcp": func(c *fakes.Conns) *api.Client {
			tr := &http.Transport{DialContext: c.Dial(tcpDial(s.Addr()))}
			t.Cleanup(tr.CloseIdleConnections)
			cl, err := api.NewClient(&api.Config{Address: s.Addr(), HttpClient: &http.Client{Transport: fakes.GateConsulTransport(tr)}})
			if err != nil {
				t.Fatal(err)
			}
			return cl
		},
	}
	for name, newClient := range clients {
		t.Run(name, func(t *testing.T) {
			conns := fakes.NewConns()
			c := newClient(conns)
			if _, err := c.KV().Put(&api.KVPair{Key: s.Prefix() + "k", Value: []byte("v")}, nil); err != nil {
				t.Fatal(err)
			}
			if conns.Open() == 0 {
				t.Fatal("the client's connection is not tracked")
			}
			conns.Sever()
			for range 2 {
				if _, _, err := c.KV().Get(s.Prefix()+"k", nil); !errors.Is(err, fakes.ErrSevered) {
					t.Fatalf("a request after Sever: %v, want ErrSevered", err)
				}
			}
			if _, _, err := s.NewClient().KV().Get(s.Prefix()+"k", nil); err != nil {
				t.Fatalf("another client after Sever: %v", err)
			}
		})
	}
}

// TestConnsSeverMySQL: a database/sql pool whose connections go through a
// Conns, in memory (OpenDBThrough) and over TCP (a connector built from
// the DSN), fails after Sever with ErrSevered.
func TestConnsSeverMySQL(t *testing.T) {
	s := fakes.MySQL(t)
	pools := map[string]func(*fakes.Conns) *sql.DB{
		"through the fake": func(c *fakes.Conns) *sql.DB {
			db, err := s.OpenDBThrough(c)
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
		"tcp": func(c *fakes.Conns) *sql.DB {
			cfg, err := mysql.ParseDSN(s.DSN())
			if err != nil {
				t.Fatal(err)
			}
			cfg.DialFunc = c.Dial(tcpDial(cfg.Addr))
			connector, err := mysql.NewConnector(cfg)
			if err != nil {
				t.Fatal(err)
			}
			db := sql.OpenDB(connector)
			t.Cleanup(func() { _ = db.Close() })
			return db
		},
	}
	for name, open := range pools {
		t.Run(name, func(t *testing.T) {
			conns := fakes.NewConns()
			db := open(conns)
			var one int
			if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
				t.Fatal(err)
			}
			if conns.Open() == 0 {
				t.Fatal("the pool's connection is not tracked")
			}
			conns.Sever()
			for range 2 {
				if err := db.QueryRow("SELECT 1").Scan(&one); !errors.Is(err, fakes.ErrSevered) {
					t.Fatalf("a statement after Sever: %v, want ErrSevered", err)
				}
			}
			if err := s.DB().QueryRow("SELECT 1").Scan(&one); err != nil {
				t.Fatalf("another pool after Sever: %v", err)
			}
		})
	}
}

// TestConnsSeverEtcd: an etcd client whose connections go through a Conns
// fails its requests after Sever.
func TestConnsSeverEtcd(t *testing.T) {
	s := fakes.Etcd(t)
	conns := fakes.NewConns()
	c := s.NewClientThrough(conns)
	ctx := context.Background()
	if _, err := c.Put(ctx, s.Prefix()+"k", "v"); err != nil {
		t.Fatal(err)
	}
	if conns.Open() == 0 {
		t.Fatal("the client's connection is not tracked")
	}
	conns.Sever()
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := c.Get(short, s.Prefix()+"k"); err == nil {
		t.Fatal("a request after Sever succeeded")
	}
	if _, err := s.DialContext(ctx, "tcp", "127.0.0.1:1"); err == nil {
		t.Fatal("DialContext reached an address that is no endpoint")
	}
}
