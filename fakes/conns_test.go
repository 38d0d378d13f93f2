package fakes_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/internal/memnet"
)

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
// TestConnsSeverConsul: an api.Client whose connections go through a
// Conns, in memory and over TCP, fails after Sever with ErrSevered.
// TestConnsSeverMySQL: a database/sql pool whose connections go through a
// Conns, in memory (OpenDBThrough) and over TCP (a connector built from
// the DSN), fails after Sever with ErrSevered.
// TestConnsSeverEtcd: an etcd client whose connections go through a Conns
// fails its requests after Sever.
