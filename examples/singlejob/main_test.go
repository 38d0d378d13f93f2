package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestExactlyOnceAndRecovery: one runner, nobody while its crashed lease is
// live, exactly one other after it expires.
func TestExactlyOnceAndRecovery(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 5 {
		var out bytes.Buffer
		rep, err := Run(ctx, 6, &out)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Fatalf("report %+v not OK:\n%s", rep, out.String())
		}
	}
}

func TestExitStatus(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-replicas", "3"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d; stderr %q", code, errOut.String())
	}
	if code := run([]string{"-replicas", "1"}, &out, &errOut); code != 1 {
		t.Fatalf("one replica: exit %d, want 1", code)
	}
	if code := run([]string{"-x"}, &out, &errOut); code != 2 {
		t.Fatalf("bad flag: exit %d, want 2", code)
	}
}
