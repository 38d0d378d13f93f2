package propertytest

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/linearize"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// recheck decodes the JSON e writes (from path, or from WriteJSON when
// path is empty) and checks it against e's model, as lockproof history
// does.
func recheck(t *testing.T, e *Evidence, path string) linearize.Verdict {
	t.Helper()
	var data []byte
	if path == "" {
		var b bytes.Buffer
		if err := e.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		data = b.Bytes()
	} else {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	var res linearize.Result
	var err error
	switch e.Model {
	case ModelLease:
		var h []linearize.Operation[linearize.LeaseInput, linearize.LeaseOutput]
		if h, err = linearize.DecodeHistory[linearize.LeaseInput, linearize.LeaseOutput](bytes.NewReader(data)); err == nil {
			model, merr := linearize.NewLeaseModel(e.TTL, e.Tolerance)
			if merr != nil {
				t.Fatal(merr)
			}
			res, err = linearize.Check(ctx, model, h, linearize.Options{})
		}
	case ModelFenced:
		var h []linearize.Operation[linearize.FencedInput[string], linearize.FencedOutput[string]]
		if h, err = linearize.DecodeHistory[linearize.FencedInput[string], linearize.FencedOutput[string]](bytes.NewReader(data)); err == nil {
			res, err = linearize.Check(ctx, linearize.NewFencedRegisterModel(""), h, linearize.Options{})
		}
	default:
		t.Fatalf("model %q", e.Model)
	}
	if err != nil {
		t.Fatal(err)
	}
	return res.Verdict
}

// A broken lock's violations are written as JSON that checks again to the
// verdict the suite found; a named check's finding carries the whole lock
// history with the lease checker's result, which may be Ok.
func TestEvidenceChecksAgainFromItsFile(t *testing.T) {
	dir := t.TempDir()
	suitemain.SetFlag(t, "rapid.shrinktime", "300ms") // a short minimization is enough here
	rep := Check(t, processLocal(), Options{OutDir: dir})
	if !rep.Failed || len(rep.Violations) == 0 {
		t.Fatalf("a process-local lock passed\n%s", rep.Output)
	}
	illegal := false
	files := map[string]bool{}
	for _, v := range rep.Violations {
		if files[v.File] {
			t.Errorf("two violations written to %s", v.File)
		}
		files[v.File] = true
		if v.Evidence == nil || !strings.HasPrefix(v.File, dir) {
			t.Fatalf("%s: evidence %v, file %q (want one under %s)", v.Property, v.Evidence, v.File, dir)
		}
		want := v.Evidence.Result.Verdict
		illegal = illegal || want == linearize.Illegal
		if got := recheck(t, v.Evidence, v.File); got != want {
			t.Errorf("%s: %s checks to %v again, the suite found %v", v.Property, v.File, got, want)
		}
		if !strings.Contains(v.String(), "lockproof history "+strings.Join(v.Evidence.HistoryArgs(), " ")) {
			t.Errorf("the violation does not say how to check its file again:\n%s", v)
		}
	}
	if !illegal {
		t.Errorf("no violation of a process-local lock rests on an illegal lock history: %v", rep.Violations)
	}
}

// The register's values are renamed to the strings lockproof history
// reads without changing the verdict: the initial 0 becomes the string
// model's initial "".
func TestRegisterEvidenceKeepsTheVerdict(t *testing.T) {
	op := func(id int, call, ret int64, in linearize.FencedInput[int], out linearize.FencedOutput[int]) regOp {
		return regOp{ID: id, ClientID: id, Call: call, Return: ret, Input: in, Output: out}
	}
	good := []regOp{
		op(0, 0, 1, linearize.FencedInput[int]{Op: linearize.Read, Token: 1}, linearize.FencedOutput[int]{OK: true, Value: 0}),
		op(1, 2, 3, linearize.FencedInput[int]{Op: linearize.Write, Token: 1, Value: 1}, linearize.FencedOutput[int]{OK: true}),
		op(2, 4, 5, linearize.FencedInput[int]{Op: linearize.Read, Token: 2}, linearize.FencedOutput[int]{OK: true, Value: 1}),
	}
	// The last read sees the initial value after a write that returned.
	stale := append(append([]regOp(nil), good[:2]...),
		op(2, 4, 5, linearize.FencedInput[int]{Op: linearize.Read, Token: 2}, linearize.FencedOutput[int]{OK: true, Value: 0}))
	for name, h := range map[string][]regOp{"good": good, "stale": stale} {
		res, err := linearize.Check(context.Background(), linearize.NewFencedRegisterModel(0), h, linearize.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e := &Evidence{Model: ModelFenced, Fenced: fencedEvidence(h), Result: res}
		if got := recheck(t, e, ""); got != res.Verdict {
			t.Errorf("%s: %v on ints, %v on the JSON strings", name, res.Verdict, got)
		}
		if want := map[string]linearize.Verdict{"good": linearize.Ok, "stale": linearize.Illegal}[name]; res.Verdict != want {
			t.Errorf("%s: verdict %v, want %v", name, res.Verdict, want)
		}
	}
	if err := (&Evidence{Model: "kv"}).WriteJSON(&bytes.Buffer{}); err == nil {
		t.Error("evidence of an unknown model was written")
	}
}
