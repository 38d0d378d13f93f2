package propertytest

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/linearize"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// recheck reads the history file e writes (from path, or from WriteJSON
// when path is empty), as lockproof history does, and checks it against
// the model the file names, which must be e's.
func recheck(t *testing.T, e *Evidence, path string) linearize.Verdict {
	t.Helper()
	var b bytes.Buffer
	if path == "" {
		if err := e.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
	} else {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	f, err := linearize.ReadFile(&b, linearize.Spec{Kind: linearize.KindKV})
	if err != nil {
		t.Fatal(err)
	}
	if f.Spec() != e.Model {
		t.Fatalf("the file names the %v, the evidence the %v", f.Spec(), e.Model)
	}
	res, err := f.Check(context.Background(), linearize.Options{})
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
		if !strings.Contains(v.String(), v.File) || !strings.Contains(v.String(), v.Evidence.Model.String()) || strings.Contains(v.String(), "lockproof history") {
			t.Errorf("the violation does not name its file and model, or names a command line:\n%s", v)
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
		e := &Evidence{Model: linearize.Spec{Kind: linearize.KindFenced}, Fenced: fencedEvidence(h), Result: res}
		if got := recheck(t, e, ""); got != res.Verdict {
			t.Errorf("%s: %v on ints, %v on the JSON strings", name, res.Verdict, got)
		}
		if want := map[string]linearize.Verdict{"good": linearize.Ok, "stale": linearize.Illegal}[name]; res.Verdict != want {
			t.Errorf("%s: verdict %v, want %v", name, res.Verdict, want)
		}
	}
	if err := (&Evidence{Model: linearize.Spec{Kind: linearize.KindKV}}).WriteJSON(&bytes.Buffer{}); err == nil {
		t.Error("a lease history was written as a key-value store's")
	}
	if err := (&Evidence{Model: linearize.Spec{Kind: "mutex"}}).WriteJSON(&bytes.Buffer{}); err == nil {
		t.Error("evidence of an unknown model was written")
	}
}

// Every model a run records (lockModel: lease, semaphore, read-write;
// checkRegister: fenced, register) travels in the evidence's file and is
// read back as the same model, with the same verdict.
func TestEvidenceModelRoundTrip(t *testing.T) {
	grant := func(id int, at time.Duration, owner uint64, shared bool) lockOp {
		return lockOp{ID: id, ClientID: id, Call: int64(at), Return: int64(at + time.Millisecond),
			Input:  linearize.LeaseInput{Lock: "L", Op: linearize.Acquire, Owner: owner, Shared: shared},
			Output: linearize.LeaseOutput{OK: true, Token: uint64(id + 1)}}
	}
	twoReaders := []lockOp{grant(0, 0, 1, true), grant(1, 10*time.Millisecond, 2, true)}
	twoWriters := []lockOp{grant(0, 0, 1, false), grant(1, 10*time.Millisecond, 2, false)}
	ttl := time.Second
	for _, c := range []struct {
		o    Options
		kind linearize.ModelKind
		h    []lockOp
		want linearize.Verdict
	}{
		{Options{TTL: ttl}, linearize.KindLease, twoWriters, linearize.Illegal},
		{Options{TTL: ttl}, linearize.KindLease, twoWriters[:1], linearize.Ok},
		{Options{TTL: ttl, Permits: 2}, linearize.KindSemaphore, twoWriters, linearize.Ok},
		{Options{TTL: ttl, Permits: 2}, linearize.KindSemaphore, append(twoWriters, grant(2, 20*time.Millisecond, 3, false)), linearize.Illegal},
		{Options{TTL: ttl, ReadWrite: true}, linearize.KindRWLock, twoReaders, linearize.Ok},
		{Options{TTL: ttl, ReadWrite: true}, linearize.KindRWLock, twoWriters, linearize.Illegal},
	} {
		spec := lockModel(c.o)
		if spec.Kind != c.kind || spec.TTL != ttl || spec.Tolerance <= 0 {
			t.Fatalf("options %+v: model %v, want a %s model of TTL %v and the locks' drift", c.o, spec, c.kind, ttl)
		}
		lock, err := linearize.Bind[linearize.LeaseInput, linearize.LeaseOutput](spec)
		if err != nil {
			t.Fatal(err)
		}
		res, err := lock.Check(context.Background(), c.h, linearize.Options{})
		if err != nil || res.Verdict != c.want {
			t.Fatalf("%v: verdict %v (%v), want %v", spec, res.Verdict, err, c.want)
		}
		if got := recheck(t, &Evidence{Model: spec, Lease: c.h, Result: res}, ""); got != c.want {
			t.Errorf("%v: read back, verdict %v, want %v", spec, got, c.want)
		}
	}
	write := func(v int) regOp {
		return regOp{ID: 0, Call: 0, Return: 1, Input: linearize.FencedInput[int]{Op: linearize.Write, Value: v}}
	}
	read := func(v int) regOp {
		return regOp{ID: 1, ClientID: 1, Call: 2, Return: 3, Input: linearize.FencedInput[int]{Op: linearize.Read}, Output: linearize.FencedOutput[int]{Value: v}}
	}
	for name, h := range map[string][]regOp{"Ok": {write(1), read(1)}, "Illegal": {write(1), read(0)}} {
		spec := linearize.Spec{Kind: linearize.KindRegister}
		res, err := checkAgainst(context.Background(), spec, plainEvidence(h), linearize.Options{})
		if err != nil || res.Verdict.String() != name {
			t.Fatalf("register: verdict %v (%v), want %s", res.Verdict, err, name)
		}
		if got := recheck(t, &Evidence{Model: spec, Register: plainEvidence(h), Result: res}, ""); got != res.Verdict {
			t.Errorf("register: read back, verdict %v, want %v", got, res.Verdict)
		}
	}
}
