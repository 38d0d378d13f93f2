package linearize

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteHTML(t *testing.T) {
	m := leaseModel(t)
	h := []lop{
		acquire(1, 1, 11, 0, 2, 1),
		acquire(2, 3, 33, 20, 21, 0),
		acquire(3, 2, 22, 50, 52, 2),
		{ID: 4, ClientID: 4, Call: ms(10), Return: ms(15), Unknown: true,
			Input: LeaseInput{Lock: "L", Op: Release, Owner: 44}},
	}
	res := check(t, m, h)
	if res.Verdict != Illegal {
		t.Fatalf("verdict %v", res.Verdict)
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, m, h, &res, Picture{All: true}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		"<!DOCTYPE html>", "<h1 class=\"Illegal\">Illegal</h1>",
		"client 1", "client 2", "client 3", "client 4", // one lane per client
		"op unknown",     // the unknown release is drawn distinctly
		"op cex",         // the counterexample is highlighted
		"cex blocker",    // and the operation the search got stuck at
		"class=\"fade\"", // the rest is faded
		"acquire(L, owner 22) -&gt; granted, token 2",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, banned := range []string{"http://", "https://", "<script", "@import", "src="} {
		if strings.Contains(page, banned) {
			t.Errorf("page is not self-contained: has %q", banned)
		}
	}
	if dir := os.Getenv("LOCKPROOF_HTML_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "timeline.html"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWriteText(t *testing.T) {
	m := NewRegisterModel(0)
	h := []rop{write(1, 0, 0, 10, 5), read(2, 1, 2, 3, 5), read(3, 2, 4, 5, 0), unknownOp(write(4, 3, 1, 2, 9))}
	res := check(t, m, h)
	var buf bytes.Buffer
	if err := WriteText(&buf, m, h, &res, Picture{Width: 30}); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	t.Log("\n" + got)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if !strings.HasPrefix(lines[0], "Illegal") {
		t.Fatalf("header %q", lines[0])
	}
	if len(lines) != 2+len(res.Counterexample) {
		t.Fatalf("%d lines for a counterexample of %d", len(lines), len(res.Counterexample))
	}
	buf.Reset()
	if err := WriteText(&buf, m, h, &res, Picture{All: true, Width: 30}); err != nil {
		t.Fatal(err)
	}
	all := buf.String()
	if !strings.Contains(all, "[~~~") || !strings.Contains(all, "write(9) -> ?") {
		t.Fatalf("unknown operation not drawn as such:\n%s", all)
	}
	ok := []rop{write(1, 0, 0, 10, 5), read(2, 1, 2, 3, 5)}
	res = check(t, m, ok)
	buf.Reset()
	if err := WriteText(&buf, m, ok, &res, Picture{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "#1 id 1") || !strings.Contains(buf.String(), "#2 id 2") {
		t.Fatalf("linearization order missing:\n%s", buf.String())
	}
}

func TestRenderRejectsForeignResult(t *testing.T) {
	m := NewRegisterModel(0)
	res := Result{Verdict: Illegal, Counterexample: []int{7}, Partitions: []Partition{{}}}
	if err := WriteText(&bytes.Buffer{}, m, nil, &res, Picture{}); err == nil {
		t.Fatal("a result that does not match the history must be an error")
	}
}

func TestRenderLargeHistory(t *testing.T) {
	h := lockGen{seed: 3, ops: 2000, clients: 8, keys: 3, unknownFrac: 0.05, ttl: 5 * time.Millisecond}.generate()
	m := leaseModel0(t, 5*time.Millisecond)
	res, err := Check(context.Background(), m, h, Options{})
	if err != nil || res.Verdict != Ok {
		t.Fatalf("%v %v", res.Verdict, err)
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, m, h, &res, Picture{}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "class=\"op"); n != len(h) {
		t.Fatalf("%d bars for %d operations", n, len(h))
	}
}

// Picture.Unit shows times as durations in both renderers; without it they
// are the history's plain numbers.
func TestPictureUnit(t *testing.T) {
	m := leaseModel(t)
	h := []lop{acquire(1, 1, 11, 0, 2, 1), acquire(2, 2, 22, 2500, 2600, 2)}
	res := check(t, m, h)
	for _, tc := range []struct {
		unit       time.Duration
		want, lack string
	}{
		{time.Nanosecond, "2.6s", "2600000000"},
		{0, "2600000000", "2.6s"},
	} {
		var page, text bytes.Buffer
		if err := WriteHTML(&page, m, h, &res, Picture{Unit: tc.unit}); err != nil {
			t.Fatal(err)
		}
		if err := WriteText(&text, m, h, &res, Picture{Unit: tc.unit}); err != nil {
			t.Fatal(err)
		}
		for name, out := range map[string]string{"html": page.String(), "text": text.String()} {
			if !strings.Contains(out, tc.want) || strings.Contains(out, tc.lack) {
				t.Errorf("unit %v, %s: want %q and no %q in\n%s", tc.unit, name, tc.want, tc.lack, out)
			}
		}
	}
}

// Counts are written "1 operation", "2 operations", never "operation(s)".
func TestSummaryPlurals(t *testing.T) {
	m := leaseModel(t)
	one := []lop{acquire(1, 1, 11, 0, 2, 1)}
	res := check(t, m, one)
	var buf bytes.Buffer
	if err := WriteText(&buf, m, one, &res, Picture{}); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); !strings.Contains(got, "1 partition,") || strings.Contains(got, "(s)") {
		t.Errorf("summary %q", strings.SplitN(got, "\n", 2)[0])
	}
	double := []lop{acquire(1, 1, 11, 0, 2, 1), acquire(2, 2, 22, 3, 4, 2)}
	res = check(t, m, double)
	buf.Reset()
	if err := WriteText(&buf, m, double, &res, Picture{}); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); !strings.Contains(got, "counterexample of 2 operations") || strings.Contains(got, "(s)") {
		t.Errorf("summary %q", strings.SplitN(got, "\n", 2)[0])
	}
}
