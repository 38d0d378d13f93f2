package linearize

import (
	"bytes"
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// specCase is a history of one kind of model, known linearizable or not.
type specCase struct {
	spec Spec
	file func(s Spec) (*File, error) // NewFile of the history
	want Verdict
}

// specCases has, for every kind, a history the model rejects and one it
// accepts.
func specCases() []specCase {
	lease := Spec{Kind: KindLease, TTL: 10 * time.Second, Tolerance: time.Millisecond}
	doubleGrant := []lop{acquire(1, 0, 1, 0, 1, 1), acquire(2, 1, 2, 2, 3, 2)}
	oneGrant := doubleGrant[:1]
	leaseFile := func(h []lop) func(Spec) (*File, error) {
		return func(s Spec) (*File, error) { return NewFile(s, h) }
	}
	threeHolders := []lop{acquire(1, 0, 1, 0, 10, 1), acquire(2, 1, 2, 20, 30, 2), acquire(3, 2, 3, 40, 50, 3)}
	readers := []lop{
		{ID: 1, ClientID: 0, Call: 0, Return: 10, Input: LeaseInput{Lock: "L", Op: Acquire, Owner: 1, Shared: true}, Output: LeaseOutput{OK: true, Token: 1}},
		{ID: 2, ClientID: 1, Call: 20, Return: 30, Input: LeaseInput{Lock: "L", Op: Acquire, Owner: 2, Shared: true}, Output: LeaseOutput{OK: true, Token: 2}},
	}
	writers := []lop{readers[0], acquire(2, 1, 2, 20, 30, 2)}
	type fin = FencedInput[string]
	type fout = FencedOutput[string]
	fenced := func(stale bool) func(Spec) (*File, error) {
		h := []Operation[fin, fout]{
			{ID: 1, ClientID: 0, Call: 0, Return: 1, Input: fin{Op: Write, Token: 2, Value: "a"}, Output: fout{OK: true}},
			{ID: 2, ClientID: 1, Call: 2, Return: 3, Input: fin{Op: Write, Token: 1, Value: "b"}, Output: fout{OK: stale}},
		}
		return func(s Spec) (*File, error) { return NewFile(s, h) }
	}
	type rin = RegisterInput[string]
	type rout = RegisterOutput[string]
	register := func(read string) func(Spec) (*File, error) {
		h := []Operation[rin, rout]{
			{ID: 1, ClientID: 0, Call: 0, Return: 1, Input: rin{Op: Write, Value: "a"}},
			{ID: 2, ClientID: 1, Call: 2, Return: 3, Input: rin{Op: Read}, Output: rout{Value: read}},
		}
		return func(s Spec) (*File, error) { return NewFile(s, h) }
	}
	kv := func(got string) func(Spec) (*File, error) {
		h := []Operation[KVInput, KVOutput]{
			{ID: 1, ClientID: 0, Call: 0, Return: 1, Input: KVInput{Op: Put, Key: "k", Value: "v"}},
			{ID: 2, ClientID: 1, Call: 2, Return: 3, Input: KVInput{Op: Get, Key: "k"}, Output: KVOutput{Value: got}},
		}
		return func(s Spec) (*File, error) { return NewFile(s, h) }
	}
	sem := Spec{Kind: KindSemaphore, Permits: 2, TTL: time.Second, Tolerance: 0}
	rw := Spec{Kind: KindRWLock, TTL: time.Second, Tolerance: time.Millisecond}
	fromCall := Spec{Kind: KindLeaseFromCall, TTL: time.Second, Tolerance: time.Millisecond}
	return []specCase{
		{lease, leaseFile(doubleGrant), Illegal},
		{lease, leaseFile(oneGrant), Ok},
		{fromCall, leaseFile(doubleGrant), Illegal},
		{fromCall, leaseFile(oneGrant), Ok},
		{sem, leaseFile(threeHolders), Illegal},
		{sem, leaseFile(threeHolders[:2]), Ok},
		{rw, leaseFile(writers), Illegal},
		{rw, leaseFile(readers), Ok},
		{Spec{Kind: KindFenced}, fenced(true), Illegal},
		{Spec{Kind: KindFenced}, fenced(false), Ok},
		{Spec{Kind: KindRegister}, register(""), Illegal},
		{Spec{Kind: KindRegister}, register("a"), Ok},
		{Spec{Kind: KindKV}, kv(""), Illegal},
		{Spec{Kind: KindKV}, kv("v"), Ok},
	}
}

// Every kind: a history written with its model is read back with the same
// model and judged the same, and its text and HTML are drawn.
func TestFileRoundTrip(t *testing.T) {
	seen := map[ModelKind]bool{}
	for _, c := range specCases() {
		seen[c.spec.Kind] = true
		t.Run(c.spec.String()+"/"+c.want.String(), func(t *testing.T) {
			f, err := c.file(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			res, err := f.Check(context.Background(), Options{})
			if err != nil || res.Verdict != c.want {
				t.Fatalf("verdict %v (%v), want %v", res.Verdict, err, c.want)
			}
			var js bytes.Buffer
			if err := f.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			back, err := ReadFile(bytes.NewReader(js.Bytes()), Spec{Kind: KindKV})
			if err != nil {
				t.Fatalf("reading %s: %v", js.String(), err)
			}
			if back.Spec() != c.spec {
				t.Fatalf("model %+v read back as %+v from\n%s", c.spec, back.Spec(), js.String())
			}
			if !reflect.DeepEqual(back.Operations(), f.Operations()) {
				t.Fatalf("operations changed:\n%v\n%v", f.Operations(), back.Operations())
			}
			again, err := back.Check(context.Background(), Options{})
			if err != nil || again.Verdict != c.want {
				t.Fatalf("read back: verdict %v (%v), want %v", again.Verdict, err, c.want)
			}
			var text, html strings.Builder
			if err := back.WriteText(&text, &again, Picture{}); err != nil || !strings.Contains(text.String(), c.want.String()) {
				t.Errorf("text (%v):\n%s", err, text.String())
			}
			if err := back.WriteHTML(&html, &again, Picture{}); err != nil || !strings.Contains(html.String(), "<html") {
				t.Errorf("HTML: %v", err)
			}
		})
	}
	for _, k := range ModelKinds {
		if !seen[k] {
			t.Errorf("kind %s has no case", k)
		}
	}
}

// A file written before the model travelled with it (no "version", no
// "model") is read with the model the reader gives.
func TestFileReadsVersionOne(t *testing.T) {
	data, err := os.ReadFile("testdata/token-regress-30.json")
	if err != nil {
		t.Fatal(err)
	}
	def := Spec{Kind: KindLease, TTL: 6 * time.Millisecond, Tolerance: time.Millisecond / 2}
	f, err := ReadFile(bytes.NewReader(data), def)
	if err != nil {
		t.Fatal(err)
	}
	if f.Spec() != def || f.Len() != len(readLeaseHistory(t, "token-regress-30.json")) {
		t.Fatalf("model %v, %d operations", f.Spec(), f.Len())
	}
	res, err := f.Check(context.Background(), Options{TimeLimit: time.Minute})
	if err != nil || res.Verdict != Illegal {
		t.Fatalf("verdict %v (%v), want Illegal", res.Verdict, err)
	}
	// A version 1 file of lease operations read with a register model is
	// refused: its inputs are not the register's.
	if _, err := ReadFile(bytes.NewReader(data), Spec{Kind: KindRegister}); !errors.Is(err, ErrDecode) {
		t.Errorf("lease operations as a register's: %v, want ErrDecode", err)
	}
	// ReadFileAs overrides the model a file names.
	var js bytes.Buffer
	if err := EncodeFile(&js, def, readLeaseHistory(t, "token-regress-30.json")); err != nil {
		t.Fatal(err)
	}
	other := Spec{Kind: KindSemaphore, Permits: 3, TTL: time.Second}
	if g, err := ReadFileAs(bytes.NewReader(js.Bytes()), other); err != nil || g.Spec() != other {
		t.Errorf("ReadFileAs: %v, %v", g, err)
	}
	// DecodeHistory reads a file of version 2 too.
	if h, err := DecodeHistory[LeaseInput, LeaseOutput](bytes.NewReader(js.Bytes())); err != nil || len(h) != f.Len() {
		t.Errorf("DecodeHistory of a version 2 file: %d operations, %v", len(h), err)
	}
}

// Malformed models and headers are refused with where and why.
func TestFileRejects(t *testing.T) {
	ops := `"operations": []`
	for _, c := range []struct{ name, doc, says string }{
		{"unknown version", `{"version": 3, ` + ops + `}`, `"version" 3: this reader knows 1`},
		{"fraction version", `{"version": 2.5, ` + ops + `}`, "cannot unmarshal number 2.5"},
		{"model in version 1", `{"model": {"kind": "kv"}, ` + ops + `}`, `"model" in a file of version 1`},
		{"no model in version 2", `{"version": 2, ` + ops + `}`, `missing "model"`},
		{"null model", `{"version": 2, "model": null, ` + ops + `}`, `missing "model"`},
		{"model not an object", `{"version": 2, "model": "lease", ` + ops + `}`, `"model" (line 1, column 25)`},
		{"missing kind", `{"version": 2, "model": {"ttl": 5}, ` + ops + `}`, `missing "kind"`},
		{"unknown kind", `{"version": 2, "model": {"kind": "mutex"}, ` + ops + `}`, `unknown model kind "mutex"`},
		{"unknown member", "{\"version\": 2,\n \"model\": {\"kind\": \"kv\", \"colour\": 1}, " + ops + `}`, `"model" (line 2, column 11): json: unknown field "colour"`},
		{"string ttl", `{"version": 2, "model": {"kind": "lease", "ttl": "1s"}, ` + ops + `}`, "cannot unmarshal string"},
		{"no ttl", `{"version": 2, "model": {"kind": "lease"}, ` + ops + `}`, "ttl 0s, want a positive duration"},
		{"negative ttl", `{"version": 2, "model": {"kind": "rwlock", "ttl": -5}, ` + ops + `}`, "ttl -5ns"},
		{"tolerance past ttl", `{"version": 2, "model": {"kind": "lease", "ttl": 5, "tolerance": 5}, ` + ops + `}`, "want 0 <= tolerance < ttl"},
		{"no permits", `{"version": 2, "model": {"kind": "semaphore", "ttl": 5}, ` + ops + `}`, "permits 0, want at least 1"},
		{"permits of a lease", `{"version": 2, "model": {"kind": "lease", "ttl": 5, "permits": 2}, ` + ops + `}`, "only the semaphore model has permits"},
		{"ttl of a register", `{"version": 2, "model": {"kind": "register", "ttl": 5}, ` + ops + `}`, "only the lease models have them"},
		{"operations of another model", `{"version": 2, "model": {"kind": "fenced"}, "operations": [{"id": 1, "client": 0, "call": 1, "return": 2, "input": {"lock": "L", "op": "acquire", "owner": 1}, "output": {"ok": true}}]}`, `operation 0 (line 1, column 60): "input"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadFile(strings.NewReader(c.doc), Spec{Kind: KindKV})
			if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("error %v, want ErrDecode saying %q", err, c.says)
			}
			if n := strings.Count(err.Error(), "linearize:"); n != 1 {
				t.Errorf("error %q says \"linearize:\" %d times", err, n)
			}
		})
	}
	// A bad default is the caller's error, not the file's.
	if _, err := ReadFile(strings.NewReader(`{`+ops+`}`), Spec{Kind: KindLease}); !errors.Is(err, ErrInvalidModel) || errors.Is(err, ErrDecode) {
		t.Errorf("invalid default: %v, want ErrInvalidModel alone", err)
	}
}

// Bind refuses a model of other operations, and a spec it cannot build;
// an invalid spec cannot be written.
func TestBindRejects(t *testing.T) {
	if _, err := Bind[LeaseInput, LeaseOutput](Spec{Kind: KindFenced}); !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), "other types") {
		t.Errorf("fenced model for lease operations: %v", err)
	}
	if _, err := Bind[KVInput, KVOutput](Spec{Kind: "nope"}); !errors.Is(err, ErrInvalidModel) {
		t.Errorf("unknown kind: %v", err)
	}
	if err := EncodeFile(&bytes.Buffer{}, Spec{Kind: KindSemaphore, TTL: time.Second}, []lop{}); !errors.Is(err, ErrInvalidModel) {
		t.Errorf("writing a semaphore of no permits: %v", err)
	}
	var zero Checker[LeaseInput, LeaseOutput]
	if _, err := zero.Check(context.Background(), nil, Options{}); !errors.Is(err, ErrInvalidModel) {
		t.Errorf("zero Checker: %v", err)
	}
}

// The one text form of each kind.
func TestSpecString(t *testing.T) {
	for s, want := range map[Spec]string{
		{Kind: KindSemaphore, Permits: 2, TTL: time.Second, Tolerance: time.Millisecond}: "semaphore model of 2 permits, TTL 1s, tolerance 1ms",
		{Kind: KindLease, TTL: time.Second}:                                              "lease model, TTL 1s, tolerance 0s",
		{Kind: KindFenced}:                                                               "fenced model",
	} {
		if got := s.String(); got != want {
			t.Errorf("%+v: %q, want %q", s, got, want)
		}
	}
}

// FuzzSpecJSON: the model's decoder never panics, refuses what Validate
// refuses, and what it accepts is written back and read as the same spec.
func FuzzSpecJSON(f *testing.F) {
	for _, s := range []string{
		`{"kind": "lease", "ttl": 10000000000, "tolerance": 10000000}`,
		`{"kind": "semaphore", "permits": 2, "ttl": 1000000000, "tolerance": 0}`,
		`{"kind": "rwlock", "ttl": 5, "tolerance": 4}`,
		`{"kind": "lease-from-call", "ttl": 1}`,
		`{"kind": "fenced"}`, `{"kind": "register"}`, `{"kind": "kv"}`,
		`{"kind": "kv", "permits": 0}`, `{"kind": "semaphore", "permits": -1, "ttl": 3}`,
		`{"kind": "lease", "ttl": 9223372036854775807, "tolerance": 9223372036854775806}`,
		`{"kind": "lease", "ttl": 1e30}`, `{"kind": 7}`, `{}`, `null`, `[]`, ``, `{"kind": "kv"} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Spec
		if err := s.UnmarshalJSON(data); err != nil {
			if s != (Spec{}) {
				t.Fatalf("a refused spec was kept: %+v", s)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted %+v, which Validate refuses: %v", s, err)
		}
		out, err := s.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var again Spec
		if err := again.UnmarshalJSON(out); err != nil || again != s {
			t.Fatalf("%s read back as %+v (%v), want %+v", out, again, err, s)
		}
		if _, err := s.build(); err != nil {
			t.Fatalf("a valid spec %+v does not build: %v", s, err)
		}
		// In a history file, the same.
		doc := []byte(`{"version": 2, "model": ` + string(out) + `, "operations": []}`)
		fl, err := ReadFile(bytes.NewReader(doc), Spec{})
		if err != nil || fl.Spec() != s {
			t.Fatalf("file %s: %v, %v", doc, fl, err)
		}
	})
}
