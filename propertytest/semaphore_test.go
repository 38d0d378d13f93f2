package propertytest

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/linearize"
)

func TestPermitsValidated(t *testing.T) {
	for _, o := range []Options{{Permits: -1}, {Permits: 3, Clients: 3}} {
		if _, err := o.withDefaults(); err == nil {
			t.Errorf("%d permits for %d clients accepted", o.Permits, o.Clients)
		}
	}
	o, err := Options{}.withDefaults()
	if err != nil || o.Permits != 1 {
		t.Fatalf("default permits %d, %v", o.Permits, err)
	}
}

// A semaphore's evidence is drawn and written with the semaphore model,
// which its file names and is checked against when read back.
func TestSemaphoreEvidence(t *testing.T) {
	op := func(id int, owner, token uint64) lockOp {
		return lockOp{ID: id, ClientID: id, Call: int64(id), Return: int64(id) + 1,
			Input:  linearize.LeaseInput{Lock: "L", Op: linearize.Acquire, Owner: owner},
			Output: linearize.LeaseOutput{OK: true, Token: token}}
	}
	h := []lockOp{op(0, 1, 1), op(1, 2, 2), op(2, 3, 3)} // three live grants
	for permits, want := range map[int]linearize.Verdict{2: linearize.Illegal, 3: linearize.Ok} {
		model, err := linearize.NewSemaphoreModel(permits, time.Second, time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		res, err := linearize.Check(context.Background(), model, h, linearize.Options{})
		if err != nil || res.Verdict != want {
			t.Fatalf("%d permits: verdict %v (%v), want %v", permits, res.Verdict, err, want)
		}
		spec := linearize.Spec{Kind: linearize.KindSemaphore, Permits: permits, TTL: time.Second, Tolerance: time.Millisecond}
		e := &Evidence{Model: spec, Lease: h, Result: res}
		var html, js bytes.Buffer
		if err := e.WriteHTML(&html); err != nil || !strings.Contains(html.String(), "acquire(L, owner 3)") {
			t.Fatalf("WriteHTML: %v (%d bytes)", err, html.Len())
		}
		if err := e.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		back, err := linearize.ReadFile(&js, linearize.Spec{Kind: linearize.KindKV})
		if err != nil || back.Len() != len(h) || back.Spec() != spec {
			t.Fatalf("JSON read back: %v, %v", back, err)
		}
		if again, err := back.Check(context.Background(), linearize.Options{}); err != nil || again.Verdict != want {
			t.Errorf("read back: verdict %v (%v), want %v", again.Verdict, err, want)
		}
	}
}
