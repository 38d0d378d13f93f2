package consulfake

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/lockproof/lockproof/fakes/internal/gatehook"
)

// GateTransport wraps base (http.DefaultTransport when nil) in an
// http.RoundTripper that passes every request through the locks.Gate of the
// request's context (see locks.GateRequest; the Consul api client puts the
// context of QueryOptions.WithContext and WriteOptions.WithContext there).
// The request is named "consul <METHOD> <endpoint>", the endpoint being the
// path without its variable parts: "/v1/kv" for every key (the fake's random
// prefix and the lock's name are left out), "/v1/session/renew" without the
// session id. The query parameters that say what a KV request does are kept,
// without their values ("consul PUT /v1/kv?acquire"), and a blocking query
// (one with an index) is marked " (blocking)": "consul GET /v1/kv (blocking)".
//
// A request whose context ended while the gate held it is not sent: it
// fails with the context's error (see gateSend). The gate is told the
// request is over once the whole reply body has been read: the wrapper
// reads it before handing the response on, so the caller gets it from
// memory. A request whose context carries no Gate goes as before,
// untouched.
func GateTransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return consulGate{base: base}
}

// consulGate is the RoundTripper of GateTransport.
type consulGate struct{ base http.RoundTripper }

// RoundTrip gates one request; see GateTransport.
func (g consulGate) RoundTrip(req *http.Request) (*http.Response, error) {
	if !gatehook.Gated(req.Context()) {
		return g.base.RoundTrip(req) // no gate: as before
	}
	ctx, done, err := gatehook.Send(req.Context(), consulRequestName(req))
	defer done()
	if err != nil {
		return nil, err // its context ended while the gate held it: never sent
	}
	resp, err := g.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	body, readErr := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{readErr}))
	return resp, nil
}

// errReader returns err, or io.EOF when err is nil: the end of a body read
// in advance, failing as the original did.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
}

// consulKVFlags are the query parameters that say what a KV request does,
// in the order they are named.
var consulKVFlags = []string{"acquire", "release", "cas", "recurse", "keys", "flags"}

// consulRequestName is the name of req for a Gate; see GateTransport.
func consulRequestName(req *http.Request) string {
	path := req.URL.Path
	q := req.URL.Query()
	var b strings.Builder
	b.WriteString("consul ")
	b.WriteString(req.Method)
	b.WriteString(" ")
	b.WriteString(consulEndpoint(path))
	if strings.HasPrefix(path, "/v1/kv/") || path == "/v1/kv" {
		sep := "?"
		for _, f := range consulKVFlags {
			if q.Has(f) {
				b.WriteString(sep + f)
				sep = "&"
			}
		}
	}
	if q.Has("index") {
		b.WriteString(" (blocking)")
	}
	return b.String()
}

// consulEndpoint cuts the variable part off an API path: the key of a KV
// request, the id or name that follows the endpoint of the others
// ("/v1/session/renew/<id>", "/v1/catalog/service/<name>").
func consulEndpoint(path string) string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	keep := 3 // "v1", the area, the endpoint
	if len(segs) >= 2 && segs[0] == "v1" && segs[1] == "kv" {
		keep = 2
	}
	if len(segs) > keep {
		segs = segs[:keep]
	}
	return "/" + strings.Join(segs, "/")
}
