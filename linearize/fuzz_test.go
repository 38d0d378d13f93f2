package linearize

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecode: the decoder never panics, rejects with ErrDecode, and what it
// accepts survives an encode/decode round trip unchanged.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"operations": []}`,
		`{"operations": [{"id": 1, "client": 0, "call": 1, "return": 2, "input": {"op": "put", "key": "x", "value": "a"}, "output": {"value": ""}}]}`,
		`{"operations": [{"id": 1, "client": 0, "call": 1, "return": 2, "input": {"op": "get", "key": "x"}, "unknown": true}]}`,
		`{"operations": [{"id": 1, "client": 0, "call": 3, "return": 2, "input": {"op": "get", "key": "x"}, "output": {"value": ""}}]}`,
		`{"operations": [{"id": 1, "client": 0, "call": 1, "return": 2, "input": {"op": "get", "key": "x", "extra": 1}, "output": {"value": ""}}]}`,
		`{"operations": [{"id": 1.5, "client": 0, "call": 1, "return": 2, "input": {"op": "get"}, "output": {}}]}`,
		`{"operations": null}`, `[]`, `{}`, ``, `{"operations": []} {}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeHistory[KVInput, KVOutput](bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v does not wrap ErrDecode", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := EncodeHistory(&buf, h); err != nil {
			t.Fatal(err)
		}
		again, err := DecodeHistory[KVInput, KVOutput](&buf)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", buf.String(), err)
		}
		if len(h) != len(again) || (len(h) > 0 && !reflect.DeepEqual(h, again)) {
			t.Fatalf("round trip changed the history:\n%v\n%v", h, again)
		}
	})
}

// FuzzCheck: on tiny histories built from the fuzzer's bytes, Check agrees
// with the brute-force reference, for the register and the lease models.
func FuzzCheck(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	f.Add([]byte{1, 0, 0, 3, 1, 1, 5, 2, 3, 0, 9, 4, 4, 200})
	f.Add([]byte{1, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9})
	f.Add([]byte{0, 255, 128, 64, 32, 16, 8, 4, 2, 1, 0, 3, 7})
	lease, err := NewLeaseModel(10, 1)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 {
			return
		}
		kind, data := data[0]%2, data[1:]
		n := min(len(data)/4, 6)
		if kind == 0 {
			h := make([]Operation[RegisterInput[int], RegisterOutput[int]], n)
			for i := range h {
				b := data[4*i : 4*i+4]
				h[i] = Operation[RegisterInput[int], RegisterOutput[int]]{
					ID: i, ClientID: i, Call: int64(b[0] % 16), Return: int64(b[0]%16 + b[1]%8),
					Input:  RegisterInput[int]{Op: RegisterOp(1 + b[2]%2), Value: int(b[3] % 3)},
					Output: RegisterOutput[int]{Value: int(b[3] / 3 % 3)}, Unknown: b[2]%7 == 6,
				}
			}
			fuzzAgree(t, NewRegisterModel(0), h)
			return
		}
		h := make([]Operation[LeaseInput, LeaseOutput], n)
		for i := range h {
			b := data[4*i : 4*i+4]
			h[i] = Operation[LeaseInput, LeaseOutput]{
				ID: i, ClientID: i, Call: int64(b[0] % 32), Return: int64(b[0]%32 + b[1]%16),
				Input:  LeaseInput{Lock: "L", Op: LeaseOp(1 + b[2]%3), Owner: uint64(1 + b[3]%3)},
				Output: LeaseOutput{OK: b[2]&8 == 0, Token: uint64(1 + b[3]/3%4)}, Unknown: b[2]%11 == 10,
			}
		}
		fuzzAgree(t, lease, h)
	})
}

func fuzzAgree[S, I, O any](t *testing.T, m Model[S, I, O], h []Operation[I, O]) {
	res, err := Check(context.Background(), m, h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := pcVerdict(bruteCheck(m, h)); res.Verdict != want {
		t.Fatalf("Check %v, reference %v on %+v", res.Verdict, want, h)
	}
	switch res.Verdict {
	case Ok:
		verifyLinearization(t, m, h, &res)
	case Illegal:
		var cex []Operation[I, O]
		for _, i := range res.Counterexample {
			cex = append(cex, h[i])
		}
		if bruteCheck(m, cex) {
			t.Fatalf("counterexample %v is linearizable", res.Counterexample)
		}
	}
}
