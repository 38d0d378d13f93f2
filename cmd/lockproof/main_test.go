package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// TestMain fails the package if a test leaves a goroutine behind. The
// bench tests run in parallel, 4 at a time: they assert what a table
// holds, never a timing, and much of their time is api.Lock's 5 s retry
// sleep (see bench's documentation). A parallel test starts only once the
// sequential ones are done, so the check tests' scheduler, which waits
// for the whole process to be quiescent, never runs beside them.
//
// The tests of the check's wall-time budget, and the two that wait on a
// nemesis command and on history files, mostly wait: they run in a second
// process (suitemain.Beside), beside the others; TestBeside collects them.
// The leak check is suitemain's; rapid's flags are left as they are.
func TestMain(m *testing.M) {
	locktest.WaitingParallel(4)
	suitemain.Main(m, suitemain.OwnRapidDefaults(),
		suitemain.Beside(`^TestBudget|^TestCheckRechecksExpectedHistories$|^TestCheckCallsTheNemesis$`))
}

// TestBeside collects the tests TestMain runs in a second process.
func TestBeside(t *testing.T) { suitemain.Collect(t) }

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

// sequentialLeases is a history of n grants and releases of lock L, one
// after another, each lease released before the next grant: linearizable.
func sequentialLeases(n int) string {
	var b strings.Builder
	b.WriteString(`{"operations": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		at := int64(i) * 10_000
		fmt.Fprintf(&b, "\n"+`{"id": %d, "client": %d, "call": %d, "return": %d, "input": {"lock": "L", "op": "acquire", "owner": %d}, "output": {"ok": true, "token": %d}},`,
			2*i, i%4, at, at+1000, i+1, i+1)
		fmt.Fprintf(&b, "\n"+`{"id": %d, "client": %d, "call": %d, "return": %d, "input": {"lock": "L", "op": "release", "owner": %d}, "output": {"ok": true}}`,
			2*i+1, i%4, at+2000, at+3000, i+1)
	}
	b.WriteString("\n]}\n")
	return b.String()
}

// A long history that checks fine is summed up in a few lines; -all
// prints every operation.
func TestHistoryLongOkIsSummarized(t *testing.T) {
	file := write(t, "long.json", sequentialLeases(2000))
	var out, errOut bytes.Buffer
	if code := run([]string{"history", file}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if lines := strings.Count(out.String(), "\n"); lines > 5 || !strings.Contains(out.String(), "4000 operations") || !strings.Contains(out.String(), "-all") {
		t.Errorf("%d lines for a linearizable history of 4000 operations, want a summary naming -all:\n%.2000s", lines, out.String())
	}
	out.Reset()
	if code := run([]string{"history", "-all", file}, &out, &errOut); code != exitOK {
		t.Fatalf("-all: exit %d\n%s", code, errOut.String())
	}
	if lines := strings.Count(out.String(), "\n"); lines < 4000 {
		t.Errorf("-all printed %d lines for 4000 operations", lines)
	}
	short := write(t, "short.json", sequentialLeases(3))
	out.Reset()
	if code := run([]string{"history", short}, &out, &errOut); code != exitOK || strings.Count(out.String(), "acquire(") != 3 {
		t.Errorf("a short history is drawn whole: exit %d\n%s", code, out.String())
	}
}

// history -h describes the JSON format it reads.
func TestHistoryHelpDescribesTheFormat(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"history", "-h"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{`"operations"`, `"call"`, `"return"`, `"unknown"`, "nanoseconds", `"op": "acquire"`, "renew", `"token"`} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("history -h does not say %q:\n%s", want, errOut.String())
		}
	}
}

// Malformed JSON: line and column, and every prefix said once.
func TestHistoryMalformedSaysWhere(t *testing.T) {
	file := write(t, "bad.json", "{\"operations\": [\n  {\"id\": 1 \"client\": 0}\n]}")
	var out, errOut bytes.Buffer
	if code := run([]string{"history", file}, &out, &errOut); code != exitUsage {
		t.Fatalf("exit %d", code)
	}
	msg := errOut.String()
	if !strings.Contains(msg, "line 2, column 12") || !strings.Contains(msg, "bad.json") {
		t.Errorf("message %q does not name the file, line and column", msg)
	}
	for _, prefix := range []string{"lockproof history:", "linearize:", "malformed JSON history"} {
		if strings.Count(msg, prefix) > 1 {
			t.Errorf("message %q repeats %q", msg, prefix)
		}
	}
}

// A short TTL works with the default tolerance, which scales with it.
func TestHistoryShortTTL(t *testing.T) {
	// Two grants 2 ms apart with a TTL of 1 ms: legal.
	legal := `{"operations": [
  {"id": 1, "client": 0, "call": 0, "return": 100000, "input": {"lock": "L", "op": "acquire", "owner": 1}, "output": {"ok": true, "token": 1}},
  {"id": 2, "client": 1, "call": 2000000, "return": 2100000, "input": {"lock": "L", "op": "acquire", "owner": 2}, "output": {"ok": true, "token": 2}}
]}`
	var out, errOut bytes.Buffer
	if code := run([]string{"history", "-ttl", "1ms", write(t, "h.json", legal)}, &out, &errOut); code != exitOK {
		t.Fatalf("-ttl 1ms: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"history", "-ttl", "1ms", "-tolerance", "1ms", write(t, "h.json", legal)}, &out, &errOut); code != exitUsage ||
		!strings.Contains(errOut.String(), "-tolerance 1ms") {
		t.Errorf("-tolerance equal to -ttl: exit %d, %q", code, errOut.String())
	}
}

// history names the exact reason of a double grant.
func TestHistoryNamesTheReason(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"history", "-ttl", "10s", write(t, "h.json", doubleGrant)}, &out, &errOut); code != exitIllegal {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	if want := "why: client 1 granted (token 2) at 3ms while client 0's lease (granted at 1ms, TTL 10s) still ran"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}

// Three grants live at once: two permits are too few, three enough.
const threeGrants = `{"operations": [
  {"id": 1, "client": 0, "call": 0, "return": 1000000,
   "input": {"lock": "S", "op": "acquire", "owner": 1}, "output": {"ok": true, "token": 1}},
  {"id": 2, "client": 1, "call": 2000000, "return": 3000000,
   "input": {"lock": "S", "op": "acquire", "owner": 2}, "output": {"ok": true, "token": 2}},
  {"id": 3, "client": 2, "call": 4000000, "return": 5000000,
   "input": {"lock": "S", "op": "acquire", "owner": 3}, "output": {"ok": true, "token": 3}}
]}`

func TestHistorySemaphore(t *testing.T) {
	file := write(t, "s.json", threeGrants)
	for permits, want := range map[string]int{"2": exitIllegal, "3": exitOK} {
		var out, errOut bytes.Buffer
		code := run([]string{"history", "-model", "semaphore", "-permits", permits, "-ttl", "10s", file}, &out, &errOut)
		if code != want {
			t.Errorf("-permits %s: exit %d, want %d\n%s%s", permits, code, want, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"history", "-model", "semaphore", "-permits", "0", file}, &out, &errOut); code != exitUsage {
		t.Errorf("-permits 0: exit %d, want %d", code, exitUsage)
	}
}

// A read, then a second acquire within the TTL: legal if it is a read
// too, not if it is a write.
const readThenAcquire = `{"operations": [
  {"id": 1, "client": 0, "call": 0, "return": 1000000,
   "input": {"lock": "S", "op": "acquire", "owner": 1, "shared": true}, "output": {"ok": true, "token": 1}},
  {"id": 2, "client": 1, "call": 2000000, "return": 3000000,
   "input": {"lock": "S", "op": "acquire", "owner": 2%s}, "output": {"ok": true, "token": 2}}
]}`

func TestHistoryRWLock(t *testing.T) {
	for second, want := range map[string]int{`, "shared": true`: exitOK, ``: exitIllegal} {
		var out, errOut bytes.Buffer
		file := write(t, "rw.json", fmt.Sprintf(readThenAcquire, second))
		if code := run([]string{"history", "-model", "rwlock", "-ttl", "10s", file}, &out, &errOut); code != want {
			t.Errorf("second acquire %q: exit %d, want %d\n%s%s", second, code, want, out.String(), errOut.String())
		}
	}
}

// A grant called while the last lease ran, granted after it ran out, then
// another grant a TTL after the slow grant's call (times in ms, TTL 100 ms):
// a double grant on one key, none for a lease that runs from its call (a
// quorum of nodes, whose copies run from the moment each node said yes).
const slowGrantFromCall = `{"operations": [
  {"id": 1, "client": 0, "call": 0, "return": 0,
   "input": {"lock": "R", "op": "acquire", "owner": 1}, "output": {"ok": true, "token": 1}},
  {"id": 2, "client": 1, "call": 60000000, "return": 110000000,
   "input": {"lock": "R", "op": "acquire", "owner": 2}, "output": {"ok": true, "token": 2}},
  {"id": 3, "client": 2, "call": 170000000, "return": 170000000,
   "input": {"lock": "R", "op": "acquire", "owner": 3}, "output": {"ok": true, "token": 3}}
]}`

func TestHistoryLeaseFromCall(t *testing.T) {
	file := write(t, "q.json", slowGrantFromCall)
	for model, want := range map[string]int{"lease": exitIllegal, "lease-from-call": exitOK} {
		var out, errOut bytes.Buffer
		if code := run([]string{"history", "-model", model, "-ttl", "100ms", "-tolerance", "1ms", file}, &out, &errOut); code != want {
			t.Errorf("-model %s: exit %d, want %d\n%s%s", model, code, want, out.String(), errOut.String())
		}
	}
}

// A history file that names its model is checked against it with no
// flags; model flags override it; a malformed model is refused with where
// and why.
func TestHistoryFileNamesItsModel(t *testing.T) {
	ops := doubleGrant[strings.Index(doubleGrant, `"operations"`):]
	semaphore := write(t, "sem.json", `{"version": 2, "model": {"kind": "semaphore", "permits": 2, "ttl": 10000000000, "tolerance": 0}, `+ops)
	lease := write(t, "lease.json", `{"version": 2, "model": {"kind": "lease", "ttl": 10000000000, "tolerance": 0}, `+ops)
	for _, c := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"two holders of a semaphore of 2", []string{"history", semaphore}, exitOK, "checked against the semaphore model of 2 permits, TTL 10s, tolerance 0s"},
		{"two holders of a lease", []string{"history", lease}, exitIllegal, "checked against the lease model, TTL 10s"},
		{"a flag overrides the file", []string{"history", "-model", "lease", semaphore}, exitIllegal, "checked against the lease model"},
		{"an old file takes -model", []string{"history", "-permits", "2", "-model", "semaphore", write(t, "old.json", doubleGrant)}, exitOK, "semaphore model of 2 permits"},
	} {
		var out, errOut bytes.Buffer
		if code := run(c.args, &out, &errOut); code != c.code || !strings.Contains(out.String(), c.says) {
			t.Errorf("%s: exit %d (want %d), output lacks %q:\n%s%s", c.name, code, c.code, c.says, out.String(), errOut.String())
		}
	}
	bad := write(t, "bad.json", "{\"version\": 2,\n \"model\": {\"kind\": \"semaphore\", \"ttl\": 5}, "+ops)
	var out, errOut bytes.Buffer
	if code := run([]string{"history", bad}, &out, &errOut); code != exitUsage ||
		!strings.Contains(errOut.String(), `"model" (line 2, column 11)`) || !strings.Contains(errOut.String(), "permits 0, want at least 1") {
		t.Errorf("malformed model: exit %d, %q", code, errOut.String())
	}
}
