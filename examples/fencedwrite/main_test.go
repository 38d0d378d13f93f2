package main

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockproof/lockproof/locks"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFenceRefusesThePausedHolder: the trusting storage loses B's update to
// the paused holder; the fenced one refuses A's late write and keeps B's.
func TestFenceRefusesThePausedHolder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	rep, err := Run(ctx, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if rep.Trusting.LateWrite != nil || rep.Trusting.Final != "A" {
		t.Errorf("trusting storage: late write %v, final %q; want accepted and \"A\" (B's update lost)",
			rep.Trusting.LateWrite, rep.Trusting.Final)
	}
	if !errors.Is(rep.Fenced.LateWrite, locks.ErrStaleToken) || rep.Fenced.Final != "B" {
		t.Errorf("fenced storage: late write %v, final %q; want ErrStaleToken and \"B\"",
			rep.Fenced.LateWrite, rep.Fenced.Final)
	}
	if !rep.OK() {
		t.Error("report not OK")
	}
}
