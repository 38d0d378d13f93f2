package miniconsul_test

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/fakes/miniconsul"
)

// FuzzRequests sends arbitrary methods, paths, query parameters and
// bodies: every request gets an answer (a handler that panicked would
// leave the client with a closed connection instead), with a status the
// agent uses, and a 500 says why. Blocking (?index) is taken out: the
// server's clock is manual, so a blocking read would wait for ever.
func FuzzRequests(f *testing.F) {
	for _, seed := range []struct {
		method byte
		target string
		body   string
	}{
		{0, "/v1/kv/k?recurse&keys&separator=/", ""},
		{1, "/v1/kv/k?cas=0&flags=3", "v"},
		{1, "/v1/kv/k?acquire=x&release=y", ""},
		{2, "/v1/kv/k?recurse&cas=x", ""},
		{1, "/v1/session/create", `{"TTL":"10s","LockDelay":"1s","Checks":["serfHealth"],"Behavior":"delete"}`},
		{1, "/v1/session/create", `{"LockDelay":5,"ServiceChecks":[{"ID":"x"}],"NodeChecks":[]}`},
		{1, "/v1/session/renew/x?dc=dc2", ""},
		{0, "/v1/session/info/x?wait=1s&stale&consistent", ""},
		{1, "/v1/txn", `[{"KV":{"Verb":"lock","Key":"k","Value":"dg==","Session":"x"}},{"KV":{"Verb":"get-tree"}}]`},
		{1, "/v1/txn", `[{"KV":{"Verb":"cas","Key":"k","Index":18}},{"Service":{}},{}]`},
		{3, "/v1/status/leader?dc=dc1", ""},
	} {
		f.Add(seed.method, seed.target, []byte(seed.body))
	}
	s, err := miniconsul.Start(miniconsul.WithClock(fakes.NewClock(epoch)))
	if err != nil {
		f.Fatal(err)
	}
	tr := &http.Transport{DialContext: s.DialInMemory}
	f.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = s.Close()
	})
	client := &http.Client{Transport: tr}
	methods := []string{"GET", "PUT", "DELETE", "POST"}
	f.Fuzz(func(t *testing.T, method byte, target string, body []byte) {
		u, err := url.Parse(target)
		if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
			t.Skip("not a request target")
		}
		q := u.Query()
		q.Del("index")
		u.RawQuery = q.Encode()
		req, err := http.NewRequest(methods[int(method)%len(methods)], s.URL()+u.RequestURI(), bytes.NewReader(body))
		if err != nil {
			t.Skip("not a request target")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: no answer: %v", req.Method, req.URL, err)
		}
		defer resp.Body.Close()
		msg, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: reading the answer: %v", req.Method, req.URL, err)
		}
		switch resp.StatusCode {
		case 200, 400, 404, 405, 409, 413, 501:
		case 500:
			if len(msg) == 0 {
				t.Fatalf("%s %s: 500 without a message", req.Method, req.URL)
			}
		default:
			t.Fatalf("%s %s: status %d %q", req.Method, req.URL, resp.StatusCode, msg)
		}
	})
}
