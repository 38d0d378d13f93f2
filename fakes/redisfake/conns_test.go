package redisfake_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/redisfake"
)

func TestConnsSeverRedis(t *testing.T) {
	s := redisfake.New(t)
	ctx := context.Background()
	clients := map[string]func(*fakes.Conns) *redis.Client{
		"in memory": s.NewClientThrough,
		"tcp": func(c *fakes.Conns) *redis.Client {
			cl := redis.NewClient(&redis.Options{Addr: s.Addr(), Dialer: c.Dial(faketest.TCPDial(s.Addr())), DisableIdentity: true, MaxRetries: -1})
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
