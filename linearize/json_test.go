package linearize

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestJSONRoundTrip(t *testing.T) {
	h := []lop{
		acquire(1, 1, 11, 0, 2, 1),
		{ID: 2, ClientID: 2, Call: 5, Return: 9, Unknown: true, Input: LeaseInput{Lock: "L", Op: Renew, Owner: 22}},
	}
	var buf bytes.Buffer
	if err := EncodeHistory(&buf, h); err != nil {
		t.Fatal(err)
	}
	t.Log(buf.String())
	got, err := DecodeHistory[LeaseInput, LeaseOutput](&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Fatalf("round trip:\n%+v\n%+v", got, h)
	}
}

func TestJSONRejects(t *testing.T) {
	op := func(fields string) string { return `{"operations": [{` + fields + `}]}` }
	base := `"id": 1, "client": 0, "call": 1, "return": 2, "input": {"lock": "L", "op": "acquire", "owner": 1}`
	cases := []struct{ name, doc, msg string }{
		{"empty", ``, "empty input"},
		{"not an object", `[]`, "cannot unmarshal"},
		{"no operations", `{}`, `missing "operations"`},
		{"null operations", `{"operations": null}`, `missing "operations"`},
		{"unknown top-level field", `{"operations": [], "x": 1}`, `unknown field "x"`},
		{"trailing data", `{"operations": []} {}`, "data after"},
		{"null operation", `{"operations": [null]}`, "null instead of an object"},
		{"unknown field", op(base + `, "output": {"ok": true}, "colour": "red"`), `unknown field "colour"`},
		{"unknown field in input", op(`"id": 1, "client": 0, "call": 1, "return": 2, "input": {"lock": "L", "op": "acquire", "owner": 1, "x": 2}, "output": {}`), `unknown field "x"`},
		{"missing id", op(`"client": 0, "call": 1, "return": 2, "input": {"op": "acquire"}, "output": {}`), `missing "id"`},
		{"missing client", op(`"id": 1, "call": 1, "return": 2, "input": {"op": "acquire"}, "output": {}`), `missing "client"`},
		{"missing call", op(`"id": 1, "client": 0, "return": 2, "input": {"op": "acquire"}, "output": {}`), `missing "call"`},
		{"missing return", op(`"id": 1, "client": 0, "call": 1, "input": {"op": "acquire"}, "output": {}`), `missing "return"`},
		{"missing input", op(`"id": 1, "client": 0, "call": 1, "return": 2, "output": {}`), `missing "input"`},
		{"missing output", op(base), `missing "output"`},
		{"output of an unknown outcome", op(base + `, "output": {"ok": true}, "unknown": true`), "unknown"},
		{"return before call", op(`"id": 1, "client": 0, "call": 5, "return": 2, "input": {"op": "acquire"}, "output": {}`), "before call"},
		{"duplicate ids", `{"operations": [{` + base + `, "output": {}}, {` + base + `, "output": {}}]}`, "share id"},
		{"string for a number", op(`"id": "1", "client": 0, "call": 1, "return": 2, "input": {"op": "acquire"}, "output": {}`), "cannot unmarshal string"},
		{"fraction for an integer", op(`"id": 1, "client": 0, "call": 1.5, "return": 2, "input": {"op": "acquire"}, "output": {}`), "cannot unmarshal number 1.5"},
		{"out of range", op(`"id": 1, "client": 0, "call": 1e30, "return": 2, "input": {"op": "acquire"}, "output": {}`), "cannot unmarshal"},
		{"unknown op", op(`"id": 1, "client": 0, "call": 1, "return": 2, "input": {"op": "steal"}, "output": {}`), "unknown lease op"},
		{"missing op", op(`"id": 1, "client": 0, "call": 1, "return": 2, "input": {"owner": 3}, "output": {}`), "invalid lease op"},
		{"bool for a bool? no: number", op(base + `, "output": {"ok": 1}`), "cannot unmarshal number"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeHistory[LeaseInput, LeaseOutput](strings.NewReader(c.doc))
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v, want ErrDecode", err)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %q does not say %q", err, c.msg)
			}
		})
	}
}

// A decoding error says where: the line and column of a syntax error, or of
// the operation at fault; and "linearize: " only once.
func TestJSONErrorsSayWhere(t *testing.T) {
	for _, c := range []struct{ name, doc, where string }{
		{"syntax", "{\"operations\": [\n  {\"id\": 1,, \"client\": 0}\n]}", "line 2, column 12"},
		{"syntax at the top", "{\"operations\" [\n]}", "line 1, column 15"},
		{"type in an operation", "{\"operations\": [\n  {\"id\": 1, \"client\": 0, \"call\": 1, \"return\": 2,\n   \"input\": {\"op\": \"acquire\"}, \"output\": {}},\n  {\"id\": \"two\", \"client\": 0, \"call\": 1, \"return\": 2,\n   \"input\": {\"op\": \"acquire\"}, \"output\": {}}\n]}",
			"operation 1 (line 4, column 3)"},
		{"missing member", "{\"operations\": [\n\n    {\"client\": 0, \"call\": 1, \"return\": 2, \"input\": {\"op\": \"acquire\"}, \"output\": {}}]}",
			"operation 0 (line 3, column 5)"},
		{"unknown op", "{\"operations\": [{\"id\": 1, \"client\": 0, \"call\": 1, \"return\": 2, \"input\": {\"op\": \"steal\"}, \"output\": {}}]}",
			"operation 0 (line 1, column 17)"},
		{"trailing data", "{\"operations\": []}\n\n x", "line 3, column 2"},
		{"return before call", "{\"operations\": [\n {\"id\": 1, \"client\": 0, \"call\": 5, \"return\": 2, \"input\": {\"op\": \"acquire\"}, \"output\": {}}]}",
			"operation 0 (id 1, line 2, column 2): invalid history: return 2 is before call 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeHistory[LeaseInput, LeaseOutput](strings.NewReader(c.doc))
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v, want ErrDecode", err)
			}
			if !strings.Contains(err.Error(), c.where) {
				t.Errorf("error %q does not say %q", err, c.where)
			}
			if n := strings.Count(err.Error(), "linearize:"); n != 1 {
				t.Errorf("error %q says \"linearize:\" %d times", err, n)
			}
			if n := strings.Count(err.Error(), "operation "); n > 1 {
				t.Errorf("error %q names the operation %d times", err, n)
			}
		})
	}
	_, err := DecodeHistory[LeaseInput, LeaseOutput](strings.NewReader(`{"operations": [{"id": 1, "client": -1, "call": 1, "return": 2, "input": {"op": "acquire"}, "output": {}}]}`))
	if !errors.Is(err, ErrDecode) || !errors.Is(err, ErrInvalidHistory) {
		t.Errorf("a history the format allows but Check refuses: %v, want both ErrDecode and ErrInvalidHistory", err)
	}
}

// BenchmarkDecodeHistory decodes a lease history of n operations written on
// one line, as encoding/json writes it: the decoder's cost must grow with
// the input, not with its square (finding each operation's line and column
// for every operation, where only an error needs it, took minutes at
// 100,000 operations).
func BenchmarkDecodeHistory(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		var doc strings.Builder
		doc.WriteString(`{"operations": [`)
		for i := range n {
			if i > 0 {
				doc.WriteString(",")
			}
			fmt.Fprintf(&doc, `{"id": %d, "client": %d, "call": %d, "return": %d, "input": {"lock": "L", "op": "acquire", "owner": %d}, "output": {"ok": true, "token": %d}}`,
				i, i%4, 40*i, 40*i+10, i+1, i+1)
		}
		doc.WriteString("]}")
		data := doc.String()
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				h, err := DecodeHistory[LeaseInput, LeaseOutput](strings.NewReader(data))
				if err != nil || len(h) != n {
					b.Fatalf("%d operations, %v", len(h), err)
				}
			}
		})
	}
}
