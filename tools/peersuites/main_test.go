package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// events is go test -json output: a top-level test and a subtest that
// pass, one that fails, one skipped, and a line that is not JSON.
const events = `{"Action":"run","Test":"TestA"}
{"Action":"output","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Test":"TestA/sub"}
{"Action":"pass","Test":"TestA"}
{"Action":"output","Test":"TestB","Output":"b failed\n"}
{"Action":"fail","Test":"TestB"}
{"Action":"skip","Test":"TestC"}
# a build line
{"Action":"output","Output":"FAIL\n"}
`

func TestTally(t *testing.T) {
	res, err := tally(strings.NewReader(events), false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"TestA": "pass", "TestB": "fail", "TestC": "skip"}
	for name, action := range want {
		if res.action[name] != action {
			t.Errorf("%s: %q, want %q", name, res.action[name], action)
		}
	}
	if len(res.action) != len(want) {
		t.Errorf("actions %v, want %v", res.action, want)
	}
	if got := res.output["TestB"].String(); got != "b failed\n" {
		t.Errorf("TestB's output %q", got)
	}
	if got := res.other.String(); got != "# a build line\nFAIL\n" {
		t.Errorf("output outside tests %q", got)
	}
}

// TestReport: a suite passes only if every applicable test passed; a
// failure, a skip, a test that did not run, or no test at all fails it.
func TestReport(t *testing.T) {
	s := suite{name: "x", skipped: map[string]string{"TestN": "not applicable"}}
	names := map[string]bool{"TestA": true, "TestB": false, "TestN": true}
	for _, tc := range []struct {
		name   string
		action map[string]string
		ok     bool
	}{
		{"all pass", map[string]string{"TestA": "pass", "TestB": "pass"}, true},
		{"the skipped one did not run", map[string]string{"TestA": "pass", "TestB": "pass", "TestN": "skip"}, true},
		{"one fails", map[string]string{"TestA": "fail", "TestB": "pass"}, false},
		{"one skips itself", map[string]string{"TestA": "skip", "TestB": "pass"}, false},
		{"one did not run", map[string]string{"TestB": "pass"}, false},
		{"none ran", map[string]string{}, false},
	} {
		res := &result{action: tc.action}
		if err := s.report(names, s.skipped, target{}, res, nil, ""); (err == nil) != tc.ok {
			t.Errorf("%s: report = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	if err := s.report(map[string]bool{"TestN": true}, s.skipped, target{}, &result{action: map[string]string{}}, nil, ""); err == nil {
		t.Error("a suite of only not-applicable tests passed")
	}
}

// TestCopyPackage: the dropped file and the test files not kept stay out,
// the helper goes in, and each test is classed by whether it starts a
// server.
func TestCopyPackage(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	files := map[string]string{
		"lib.go":         "package p\n",
		"server_test.go": "package p\nfunc startServer() {}\n",
		"a_test.go": "package p\nimport \"testing\"\n" +
			"func TestUses(t *testing.T) {\n\tstartServer()\n}\n\nfunc TestPure(t *testing.T) {\n}\n",
		"b_test.go": "package p\nimport \"testing\"\nfunc TestOther(t *testing.T) {}\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := suite{drop: []string{"server_test.go"}, keep: regexp.MustCompile(`^a_test\.go$`),
		helper: "zk_server_test.go", starts: "startServer("}
	names, err := s.copyPackage(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || !names["TestUses"] || names["TestPure"] {
		t.Errorf("tests %v, want TestUses (a server) and TestPure (none)", names)
	}
	entries, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if want := "a_test.go lib.go lockproof_zk_server_test.go"; strings.Join(got, " ") != want {
		t.Errorf("copied %v, want %s", got, want)
	}
}

// TestPatch: a patch applies where its text occurs once, and fails the
// copy where it occurs never or twice.
func TestPatch(t *testing.T) {
	s := suite{patches: []patch{{file: "h_test.go", old: "func f(", new: "func g("}}}
	got, err := s.patch("h_test.go", []byte("func f() {}\n"))
	if err != nil || string(got) != "func g() {}\n" {
		t.Errorf("patch = %q, %v; want func g", got, err)
	}
	if got, err := s.patch("other_test.go", []byte("func f() {}\n")); err != nil || string(got) != "func f() {}\n" {
		t.Errorf("another file was patched: %q, %v", got, err)
	}
	for _, text := range []string{"func h() {}\n", "func f() {}\nfunc f() {}\n"} {
		if _, err := s.patch("h_test.go", []byte(text)); err == nil {
			t.Errorf("patching %q: no error", text)
		}
	}
}

// TestNotApplicable: the fake-only list is skipped on the fake, not on
// the real server; the shared list on both.
func TestNotApplicable(t *testing.T) {
	s := suite{skipped: map[string]string{"TestE": "ensemble"}, skippedFake: map[string]string{"TestC": "catalog"}}
	if got := s.notApplicable(target{}); len(got) != 2 || got["TestC"] != "catalog" || got["TestE"] != "ensemble" {
		t.Errorf("on the fake: %v", got)
	}
	if got := s.notApplicable(target{addr: "127.0.0.1:1"}); len(got) != 1 || got["TestE"] != "ensemble" {
		t.Errorf("on the real server: %v", got)
	}
}

// TestCheckTarget: a server whose data the suite deletes must be on this
// machine unless -wipe consents; a malformed address is refused.
func TestCheckTarget(t *testing.T) {
	for _, c := range []struct {
		addr string
		wipe bool
		ok   bool
	}{
		{"", false, true},
		{"127.0.0.1:2181", false, true},
		{"127.0.0.2:8500", false, true},
		{"[::1]:2181", false, true},
		{"localhost:8500", false, true},
		{"10.0.0.5:2181", false, false},
		{"10.0.0.5:2181", true, true},
		{"zk.example.com:2181", false, false},
		{"127.0.0.1", false, false},
		{"127.0.0.1:0", false, false},
		{"127.0.0.1:port", true, false},
	} {
		err := checkTarget(c.addr, c.wipe)
		if (err == nil) != c.ok {
			t.Errorf("checkTarget(%q, wipe=%v) = %v, want ok=%v", c.addr, c.wipe, err, c.ok)
		}
	}
}
