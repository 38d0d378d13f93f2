package miniconsul_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/fakes/miniconsul"
)

// envConsulAddr names the real agent the differential tests compare
// miniconsul with (host:port of its HTTP API). It must be an agent of its
// own: the tests write under a prefix of their own and delete it after.
const envConsulAddr = "LOCKPROOF_CONSUL_ADDR"

// diffTarget is one server under a differential test: its base URL, the
// key prefix the test writes under, and what it observed there.
type diffTarget struct {
	t        *testing.T
	name     string
	url      string
	prefix   string
	client   *http.Client
	sessions map[string]string // session ID -> its name in observations
	obs      []string
}

// agentURL returns the real agent's base URL, or skips the test.
func agentURL(t *testing.T) string {
	addr := os.Getenv(envConsulAddr)
	if addr == "" {
		t.Skipf("%s is not set: no real Consul agent to compare miniconsul with", envConsulAddr)
	}
	return "http://" + addr
}

// diffTargets returns a fresh miniconsul, named as the agent's node, and
// the real agent, each with a prefix of its own.
func diffTargets(t *testing.T) (*diffTarget, *diffTarget) {
	t.Helper()
	agent := newDiffTarget(t, "real agent", agentURL(t))
	var self struct {
		Config struct{ NodeName, Datacenter string }
	}
	if err := json.Unmarshal([]byte(agent.body("GET", "/v1/agent/self", "")), &self); err != nil {
		t.Fatalf("the agent's /v1/agent/self: %v", err)
	}
	s, err := miniconsul.Start(miniconsul.WithNodeName(self.Config.NodeName), miniconsul.WithDatacenter(self.Config.Datacenter))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after mini's own cleanups, registered later
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return newDiffTarget(t, "miniconsul", s.URL()), agent
}

func newDiffTarget(t *testing.T, name, url string) *diffTarget {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	d := &diffTarget{t: t, name: name, url: url, prefix: "lockproof-diff-" + hex.EncodeToString(b[:]) + "/",
		client: &http.Client{Transport: &http.Transport{}}, sessions: map[string]string{}}
	t.Cleanup(func() {
		d.send("DELETE", "/v1/kv/"+d.prefix+"?recurse", "")
		d.client.CloseIdleConnections()
	})
	return d
}

// send makes one request, "{p}" in path and body standing for the prefix
// and "{s<n>}" for the test's n-th session, and returns the status, the
// X-Consul-Index header and the body.
func (d *diffTarget) send(method, path, body string) (int, uint64, string) {
	d.t.Helper()
	expand := func(s string) string {
		s = strings.ReplaceAll(s, "{p}", d.prefix)
		for id, name := range d.sessions {
			s = strings.ReplaceAll(s, "{"+name+"}", id)
		}
		return s
	}
	req, err := http.NewRequest(method, d.url+expand(path), strings.NewReader(expand(body)))
	if err != nil {
		d.t.Fatal(err)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		d.t.Fatalf("%s: %s %s: %v", d.name, method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatalf("%s: %s %s: %v", d.name, method, path, err)
	}
	index, _ := strconv.ParseUint(resp.Header.Get("X-Consul-Index"), 10, 64)
	return resp.StatusCode, index, string(b)
}

// body is send's body.
func (d *diffTarget) body(method, path, body string) string {
	d.t.Helper()
	_, _, b := d.send(method, path, body)
	return b
}

// observe makes a request and records its status and normalized body.
func (d *diffTarget) observe(method, path, body string) {
	d.t.Helper()
	status, _, b := d.send(method, path, body)
	d.note("%s %s -> %d %s", method, path, status, d.normalize(b))
}

func (d *diffTarget) note(format string, args ...any) {
	d.obs = append(d.obs, fmt.Sprintf(format, args...))
}

// indexField matches the indices a body carries, which differ between
// servers by construction.
var indexField = regexp.MustCompile(`"(CreateIndex|ModifyIndex)":\d+|modify index \d+`)

// normalize compacts a JSON body (a dev agent indents its JSON), replaces
// the prefix, the sessions' IDs and the raft indices by names, and trims
// it.
func (d *diffTarget) normalize(b string) string {
	var compact bytes.Buffer
	if json.Compact(&compact, []byte(b)) == nil {
		b = compact.String()
	}
	b = strings.ReplaceAll(b, d.prefix, "{p}")
	for id, name := range d.sessions {
		b = strings.ReplaceAll(b, id, "{"+name+"}")
	}
	b = indexField.ReplaceAllStringFunc(b, func(m string) string {
		return m[:strings.LastIndexAny(m, ": ")+1] + "N"
	})
	return strings.TrimSpace(b)
}

// newSession creates a session (body given) and names it s<n>.
func (d *diffTarget) newSession(body string) {
	d.t.Helper()
	status, _, b := d.send("PUT", "/v1/session/create", body)
	var out struct{ ID string }
	if err := json.Unmarshal([]byte(b), &out); status != http.StatusOK || err != nil || out.ID == "" {
		d.t.Fatalf("%s: creating a session: %d %s", d.name, status, b)
	}
	d.sessions[out.ID] = fmt.Sprintf("s%d", len(d.sessions)+1)
	d.t.Cleanup(func() { d.send("PUT", "/v1/session/destroy/"+out.ID, "") })
}

// runDiff runs scenario on miniconsul and on the agent and compares what
// each observed, line by line.
func runDiff(t *testing.T, scenario func(d *diffTarget)) {
	mini, agent := diffTargets(t)
	scenario(mini)
	scenario(agent)
	for i := 0; i < max(len(mini.obs), len(agent.obs)); i++ {
		var m, a string
		if i < len(mini.obs) {
			m = mini.obs[i]
		}
		if i < len(agent.obs) {
			a = agent.obs[i]
		}
		if m != a {
			t.Errorf("observation %d differs:\n  miniconsul: %s\n  real agent: %s", i, m, a)
		}
	}
	if len(mini.obs) == 0 {
		t.Fatal("the scenario observed nothing")
	}
	if !t.Failed() {
		t.Logf("%d observations agree:\n  %s", len(mini.obs), strings.Join(mini.obs, "\n  "))
	}
}

// TestDifferentialIndex: a missing key reads at an index of at least 1,
// the first write lands above 1, every write takes a fresh index, and a
// CAS at index 1 (a stale index on every server) fails.
func TestDifferentialIndex(t *testing.T) {
	runDiff(t, func(d *diffTarget) {
		_, missing, _ := d.send("GET", "/v1/kv/{p}a", "")
		d.note("missing key's index >= 1: %v", missing >= 1)
		d.observe("PUT", "/v1/kv/{p}a", "1")
		_, first, _ := d.send("GET", "/v1/kv/{p}a", "")
		d.note("first write's index > 1: %v; > the missing key's: %v", first > 1, first > missing)
		last := first
		for _, w := range []struct{ path, value string }{{"{p}a", "2"}, {"{p}b", "1"}, {"{p}a", "3"}} {
			d.observe("PUT", "/v1/kv/"+w.path, w.value)
			_, index, _ := d.send("GET", "/v1/kv/"+w.path, "")
			d.note("write of %s=%s: a fresh index: %v", w.path, w.value, index > last)
			last = index
		}
		d.observe("PUT", "/v1/kv/{p}a?cas=1", "4")
		d.observe("DELETE", "/v1/kv/{p}a?cas=1", "")
		d.observe("GET", "/v1/kv/{p}a?raw", "")
	})
}

// TestDifferentialTxn: /v1/txn's KV verbs, their results and the errors
// (status and messages) of transactions that fail.
func TestDifferentialTxn(t *testing.T) {
	runDiff(t, func(d *diffTarget) {
		d.newSession(`{"LockDelay":"0s"}`)
		for _, ops := range []string{
			`{"KV":{"Verb":"set","Key":"{p}a","Value":"MQ=="}},{"KV":{"Verb":"set","Key":"{p}b","Value":"Mg==","Flags":7}}`,
			`{"KV":{"Verb":"get","Key":"{p}a"}},{"KV":{"Verb":"get-tree","Key":"{p}"}}`,
			`{"KV":{"Verb":"get","Key":"{p}missing"}}`,
			`{"KV":{"Verb":"get-or-empty","Key":"{p}missing"}}`,
			`{"KV":{"Verb":"cas","Key":"{p}a","Value":"Mw==","Index":1}}`,
			`{"KV":{"Verb":"delete-cas","Key":"{p}a","Index":1}}`,
			`{"KV":{"Verb":"check-index","Key":"{p}a","Index":1}}`,
			`{"KV":{"Verb":"check-not-exists","Key":"{p}a"}}`,
			`{"KV":{"Verb":"check-not-exists","Key":"{p}missing"}}`,
			`{"KV":{"Verb":"lock","Key":"{p}l","Value":"MQ==","Session":"{s1}"}},{"KV":{"Verb":"check-session","Key":"{p}l","Session":"{s1}"}}`,
			`{"KV":{"Verb":"check-session","Key":"{p}a","Session":"{s1}"}}`,
			`{"KV":{"Verb":"lock","Key":"{p}m","Session":"00000000-0000-0000-0000-000000000000"}}`,
			`{"KV":{"Verb":"unlock","Key":"{p}l","Session":"{s1}"}},{"KV":{"Verb":"get","Key":"{p}l"}}`,
			`{"KV":{"Verb":"lock","Key":"{p}n"}}`,
			`{"KV":{"Verb":"set","Key":""}}`,
			`{"KV":{"Verb":"get","Key":""}}`,
			`{"KV":{"Verb":"frobnicate","Key":"{p}a"}}`,
			`{"KV":{"Verb":"set","Key":"{p}c","Value":"MQ=="}},{"KV":{"Verb":"get","Key":"{p}missing"}}`,
			`{"KV":{"Verb":"get","Key":"{p}c"}}`,
			`{"KV":{"Verb":"delete","Key":"{p}b"}},{"KV":{"Verb":"delete-tree","Key":"{p}l"}},{"KV":{"Verb":"get-tree","Key":"{p}"}}`,
		} {
			d.observe("PUT", "/v1/txn", "["+ops+"]")
		}
		d.observe("PUT", "/v1/txn", "not json")
		d.observe("PUT", "/v1/txn", "[]")
		d.observe("GET", "/v1/txn", "[]")
	})
}

// TestDifferentialDatacenter: ?dc= of a datacenter the agent does not know
// is refused on every endpoint; its own is served.
func TestDifferentialDatacenter(t *testing.T) {
	runDiff(t, func(d *diffTarget) {
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/v1/kv/{p}a?dc=unknown", ""},
			{"PUT", "/v1/kv/{p}a?dc=unknown", "1"},
			{"DELETE", "/v1/kv/{p}a?dc=unknown", ""},
			{"GET", "/v1/kv/{p}?recurse&dc=unknown", ""},
			{"PUT", "/v1/txn?dc=unknown", `[{"KV":{"Verb":"get","Key":"{p}a"}}]`},
			{"PUT", "/v1/session/create?dc=unknown", "{}"},
			{"GET", "/v1/session/list?dc=unknown", ""},
			{"GET", "/v1/status/leader?dc=unknown", ""},
			{"GET", "/v1/status/peers?dc=unknown", ""},
			{"PUT", "/v1/kv/{p}a?dc=dc1", "1"},
			{"GET", "/v1/kv/{p}a?raw&dc=dc1", ""},
		} {
			d.observe(r.method, r.path, r.body)
		}
	})
}

// TestDifferentialSessionChecks: a session naming a check the node does not
// have is refused, one naming serfHealth is created.
func TestDifferentialSessionChecks(t *testing.T) {
	runDiff(t, func(d *diffTarget) {
		d.observe("PUT", "/v1/session/create", `{"Checks":["no-such-check"]}`)
		d.observe("PUT", "/v1/session/create", `{"NodeChecks":["no-such-check"]}`)
		d.observe("PUT", "/v1/session/create", `{"ServiceChecks":[{"ID":"no-such-check"}]}`)
		d.observe("PUT", "/v1/session/create", `{"Checks":["serfHealth","no-such-check"]}`)
		status, _, b := d.send("PUT", "/v1/session/create", `{"Checks":["serfHealth"]}`)
		d.note("a session on serfHealth: %d, an ID: %v", status, strings.Contains(b, `"ID"`))
		var out struct{ ID string }
		if json.Unmarshal([]byte(b), &out) == nil && out.ID != "" {
			d.send("PUT", "/v1/session/destroy/"+out.ID, "")
		}
	})
}
