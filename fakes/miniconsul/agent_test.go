package miniconsul_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes/miniconsul"
)

// TestFirstWriteIsAboveOne: on a fresh server a missing key reads at index
// 1 and the first write lands above it, so a blocking query at index 1 is
// woken by that write (the clock never moves) and 1 is a stale CAS index.
func TestFirstWriteIsAboveOne(t *testing.T) {
	s, c, _ := start(t)
	p, meta := mustGet(t, c, "k")
	if p != nil || meta.LastIndex != 1 {
		t.Fatalf("missing key on a fresh server: %+v at index %d, want none at 1", p, meta.LastIndex)
	}
	woke := blockingGet(c, "k", meta.LastIndex, 0)
	waitBlocked(t, s, 1)
	if _, err := c.KV().Put(&api.KVPair{Key: "k", Value: []byte("v")}, nil); err != nil {
		t.Fatal(err)
	}
	r := <-woke
	if r.err != nil || r.pair == nil || r.pair.ModifyIndex <= 1 || r.meta.LastIndex != r.pair.ModifyIndex {
		t.Fatalf("the query at index 1 woke with %+v, %+v, %v; want the write, above 1", r.pair, r.meta, r.err)
	}
	stale := &api.KVPair{Key: "k", Value: []byte("w"), ModifyIndex: 1}
	if ok, _, err := c.KV().CAS(stale, nil); ok || err != nil {
		t.Fatalf("CAS at index 1 = %v, %v; want false", ok, err)
	}
	stale.ModifyIndex = r.pair.ModifyIndex
	if ok, _, err := c.KV().CAS(stale, nil); !ok || err != nil {
		t.Fatalf("CAS at the key's index = %v, %v; want true", ok, err)
	}
}

// TestEveryRaftWriteTakesAnIndex: a write that changes nothing still
// takes an index of the raft log (a failed CAS, an equal write, a delete
// of a missing key, a destroy of no session, a session refused by the
// state store); what the leader refuses before raft (an acquire under
// lock-delay) and a renewal do not.
func TestEveryRaftWriteTakesAnIndex(t *testing.T) {
	s, c, _ := start(t)
	kv := c.KV()
	if _, err := kv.Put(&api.KVPair{Key: "k", Value: []byte("v")}, nil); err != nil {
		t.Fatal(err)
	}
	sess := mustSession(t, c, &api.SessionEntry{TTL: "10s"})
	for _, tc := range []struct {
		what  string
		write func() error
		takes bool
	}{
		{"an equal write", func() error { _, err := kv.Put(&api.KVPair{Key: "k", Value: []byte("v")}, nil); return err }, true},
		{"a failed CAS", func() error {
			_, _, err := kv.CAS(&api.KVPair{Key: "k", ModifyIndex: 1}, nil)
			return err
		}, true},
		{"a delete of a missing key", func() error { _, err := kv.Delete("gone", nil); return err }, true},
		{"a destroy of no session", func() error {
			_, err := c.Session().Destroy("00000000-0000-4000-8000-000000000000", nil)
			return err
		}, true},
		{"a session with a missing check", func() error {
			_, _, err := c.Session().Create(&api.SessionEntry{NodeChecks: []string{"dne"}}, nil)
			if err == nil {
				t.Error("a session with a missing check was created")
			}
			return nil
		}, true},
		{"a renewal", func() error { _, _, err := c.Session().Renew(sess, nil); return err }, false},
	} {
		before := s.Index()
		if err := tc.write(); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if took := s.Index() == before+1; took != tc.takes || s.Index() > before+1 {
			t.Errorf("%s: index %d -> %d; want an index taken: %v", tc.what, before, s.Index(), tc.takes)
		}
	}
	// An acquire under lock-delay is refused by the leader, before raft.
	if !mustAcquire(t, c, "lock", sess) {
		t.Fatal("acquire failed")
	}
	s.InvalidateSession(sess)
	other := mustSession(t, c, nil)
	before := s.Index()
	if mustAcquire(t, c, "lock", other) || s.Index() != before {
		t.Errorf("an acquire under lock-delay: index %d -> %d, want refused and unchanged", before, s.Index())
	}
}

// TestWrongDatacenter: every endpoint answers a ?dc= of another
// datacenter with 500 "No path to datacenter", after the checks of its
// HTTP layer; the server's own datacenter, and no ?dc=, are served.
func TestWrongDatacenter(t *testing.T) {
	s, c, _ := start(t, miniconsul.WithDatacenter("east"))
	sess := mustSession(t, c, nil)
	raw(t, s, "PUT", "/v1/kv/west?dc=west", "v")
	if p, _ := mustGet(t, c, "west"); p != nil {
		t.Fatalf("a write to dc west was applied here: %+v", p)
	}
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/kv/k", ""},
		{"GET", "/v1/kv/?recurse", ""},
		{"GET", "/v1/kv/?keys", ""},
		{"PUT", "/v1/kv/k", "v"},
		{"PUT", "/v1/kv/k?acquire=" + sess, "v"},
		{"DELETE", "/v1/kv/k", ""},
		{"DELETE", "/v1/kv/k?cas=1", ""},
		{"PUT", "/v1/session/create", ""},
		{"PUT", "/v1/session/destroy/" + sess, ""},
		{"PUT", "/v1/session/renew/" + sess, ""},
		{"GET", "/v1/session/info/" + sess, ""},
		{"GET", "/v1/session/list", ""},
		{"GET", "/v1/session/node/miniconsul", ""},
		{"GET", "/v1/status/leader", ""},
		{"GET", "/v1/status/peers", ""},
		{"PUT", "/v1/txn", `[{"KV":{"Verb":"get","Key":"k"}}]`},
		{"PUT", "/v1/txn", `[{"KV":{"Verb":"set","Key":"k"}}]`},
	} {
		sep := "?"
		if strings.Contains(tc.path, "?") {
			sep = "&"
		}
		if code, body := raw(t, s, tc.method, tc.path+sep+"dc=west", tc.body); code != 500 || body != "No path to datacenter" {
			t.Errorf("%s %s, dc west: %d %q; want 500 No path to datacenter", tc.method, tc.path, code, body)
		}
		if code, body := raw(t, s, tc.method, tc.path+sep+"dc=east", tc.body); code == 500 {
			t.Errorf("%s %s, dc east: %d %q", tc.method, tc.path, code, body)
		}
	}
	if info, _, err := c.Session().Info(sess, nil); err != nil || info != nil {
		t.Errorf("the session after its destroy in dc east: %+v, %v", info, err)
	}
	// A check of the HTTP layer comes first.
	if code, body := raw(t, s, "GET", "/v1/kv/?dc=west", ""); code != 400 || body != "Missing key name" {
		t.Errorf("GET /v1/kv/?dc=west: %d %q, want 400 Missing key name", code, body)
	}
	if s.Datacenter() != "east" {
		t.Errorf("Datacenter() = %q", s.Datacenter())
	}
	if _, err := miniconsul.Start(miniconsul.WithDatacenter("")); err == nil {
		t.Error("Start with an empty datacenter succeeded")
	}
}

// TestSessionChecksMustExist: a session naming a check the node does not
// have is refused as the agent refuses it; serfHealth, or no check, is
// accepted.
func TestSessionChecksMustExist(t *testing.T) {
	s, c, _ := start(t)
	for _, tc := range []struct {
		se   api.SessionEntry
		want string
	}{
		{api.SessionEntry{NodeChecks: []string{"dne"}}, "apply failed: Missing check 'dne' registration"},
		{api.SessionEntry{NodeChecks: []string{"serfHealth", "dne"}}, "apply failed: Missing check 'dne' registration"},
		{api.SessionEntry{Checks: []string{"dne"}}, "apply failed: Missing check 'dne' registration"},
		{api.SessionEntry{ServiceChecks: []api.ServiceCheck{{ID: "redis:alive"}}}, "apply failed: Missing check 'redis:alive' registration"},
	} {
		_, _, err := c.Session().Create(&tc.se, nil)
		wantStatus(t, tc.want, err, http.StatusInternalServerError, tc.want)
	}
	if len(s.Sessions()) != 0 {
		t.Fatalf("refused sessions were created: %v", s.Sessions())
	}
	for _, se := range []*api.SessionEntry{nil, {NodeChecks: []string{"serfHealth"}}, {NodeChecks: []string{}}} {
		mustSession(t, c, se)
	}
}
