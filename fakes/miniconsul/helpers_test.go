package miniconsul_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/miniconsul"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// start starts a server on a manual clock and returns it with an api client
// whose connections are closed at cleanup.
func start(t testing.TB, opts ...miniconsul.Option) (*miniconsul.Server, *api.Client, *fakes.Clock) {
	t.Helper()
	clock := fakes.NewClock(epoch)
	s, err := miniconsul.Start(append([]miniconsul.Option{miniconsul.WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		tr.CloseIdleConnections()
	})
	c, err := api.NewClient(&api.Config{Address: s.Addr(), HttpClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	return s, c, clock
}

// raw sends one request and returns the status and body.
func raw(t testing.TB, s *miniconsul.Server, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func bg() context.Context { return context.Background() }

// waitBlocked waits (wall clock, bounded) until n queries are parked.
func waitBlocked(t testing.TB, s *miniconsul.Server, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), 5*time.Second)
	defer cancel()
	if err := s.WaitBlocked(ctx, n); err != nil {
		t.Fatal(err)
	}
}

func mustSession(t testing.TB, c *api.Client, se *api.SessionEntry) string {
	t.Helper()
	id, _, err := c.Session().Create(se, nil)
	if err != nil {
		t.Fatalf("session create: %v", err)
	}
	return id
}

func mustGet(t testing.TB, c *api.Client, key string) (*api.KVPair, *api.QueryMeta) {
	t.Helper()
	p, meta, err := c.KV().Get(key, nil)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return p, meta
}

func mustAcquire(t testing.TB, c *api.Client, key, sess string) bool {
	t.Helper()
	ok, _, err := c.KV().Acquire(&api.KVPair{Key: key, Session: sess}, nil)
	if err != nil {
		t.Fatalf("acquire %s: %v", key, err)
	}
	return ok
}
