package etcdfake_test

import (
	"net/url"
	"testing"

	"github.com/lockproof/lockproof/fakes/etcdfake"
)

// Addr is the host:port of the endpoint, without its scheme.
func TestAddr(t *testing.T) {
	t.Parallel()
	e := etcdfake.New(t, etcdfake.ForceEmbedded())
	u, err := url.Parse(e.Endpoint(0))
	if err != nil {
		t.Fatal(err)
	}
	if e.Addr() != u.Host || u.Host == "" {
		t.Fatalf("Addr() = %q, endpoint %q", e.Addr(), e.Endpoint(0))
	}
}
