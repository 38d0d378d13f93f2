package consulfake_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/fakes/internal/faketest"
)

func TestConnsSeverConsul(t *testing.T) {
	s := consulfake.New(t, consulfake.ForceMiniconsul())
	clients := map[string]func(*fakes.Conns) *api.Client{
		"in memory": s.NewClientThrough,
		"tcp": func(c *fakes.Conns) *api.Client {
			tr := &http.Transport{DialContext: c.Dial(faketest.TCPDial(s.Addr()))}
			t.Cleanup(tr.CloseIdleConnections)
			cl, err := api.NewClient(&api.Config{Address: s.Addr(), HttpClient: &http.Client{Transport: consulfake.GateTransport(tr)}})
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
