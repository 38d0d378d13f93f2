package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Two clients hold lock L at once: B is granted 1 ms after A, with a TTL of
// 10 s and no release in between.
const doubleGrant = `{"operations": [
  {"id": 1, "client": 0, "call": 0, "return": 1000000,
   "input": {"lock": "L", "op": "acquire", "owner": 1}, "output": {"ok": true, "token": 1}},
  {"id": 2, "client": 1, "call": 2000000, "return": 3000000,
   "input": {"lock": "L", "op": "acquire", "owner": 2}, "output": {"ok": true, "token": 2}}
]}`

// The same, but B comes 11 s later: A's lease may have expired.
const legalExpiry = `{"operations": [
  {"id": 1, "client": 0, "call": 0, "return": 1000000,
   "input": {"lock": "L", "op": "acquire", "owner": 1}, "output": {"ok": true, "token": 1}},
  {"id": 2, "client": 1, "call": 11000000000, "return": 11001000000,
   "input": {"lock": "L", "op": "acquire", "owner": 2}, "output": {"ok": true, "token": 2}}
]}`

func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHistoryVerdicts(t *testing.T) {
	for _, c := range []struct {
		name, body string
		code       int
		says       string
	}{
		{"double grant", doubleGrant, exitIllegal, "not linearizable"},
		{"legal expiry", legalExpiry, exitOK, "linearizable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			html := filepath.Join(t.TempDir(), "t.html")
			var out, errOut bytes.Buffer
			code := run([]string{"history", "-ttl", "10s", "-html", html, write(t, "h.json", c.body)}, &out, &errOut)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), c.says) {
				t.Fatalf("output lacks %q:\n%s", c.says, out.String())
			}
			page, err := os.ReadFile(html)
			if err != nil || !strings.Contains(strings.ToLower(string(page)), "<html") {
				t.Fatalf("HTML timeline not written (%v)", err)
			}
		})
	}
}

func TestHistoryBadInput(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"no command", nil},
		{"unknown command", []string{"frobnicate"}},
		{"no file", []string{"history"}},
		{"missing file", []string{"history", filepath.Join(t.TempDir(), "none.json")}},
		{"malformed", []string{"history", write(t, "bad.json", `{"operations": [{"id": 1}]}`)}},
		{"unknown model", []string{"history", "-model", "nope", write(t, "h.json", legalExpiry)}},
		{"bad ttl", []string{"history", "-ttl", "0s", write(t, "h.json", legalExpiry)}},
	} {
		var out, errOut bytes.Buffer
		if code := run(c.args, &out, &errOut); code != exitUsage {
			t.Errorf("%s: exit %d, want %d (stderr %q)", c.name, code, exitUsage, errOut.String())
		}
	}
}
