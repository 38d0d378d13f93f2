package etcdfake_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/etcdfake"
)

func TestConnsSeverEtcd(t *testing.T) {
	t.Parallel()
	s := etcdfake.New(t)
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
