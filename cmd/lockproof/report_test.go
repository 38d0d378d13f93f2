package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockproof/lockproof/linearize"
	"github.com/lockproof/lockproof/propertytest"
)

// crowdedLeaseHistory is a double grant whose client 1 makes operations
// the timeline must keep apart: two that start and end at one instant a
// microsecond apart, a renewal right after them, and an acquire whose
// outcome is unknown (drawn to the end of the axis) followed by a release.
func crowdedLeaseHistory() []linearize.Operation[linearize.LeaseInput, linearize.LeaseOutput] {
	ms := func(n float64) int64 { return int64(n * float64(time.Millisecond)) }
	op := func(id, client int, kind linearize.LeaseOp, owner uint64, call, ret int64, ok bool, token uint64) linearize.Operation[linearize.LeaseInput, linearize.LeaseOutput] {
		return linearize.Operation[linearize.LeaseInput, linearize.LeaseOutput]{ID: id, ClientID: client, Call: call, Return: ret,
			Input:  linearize.LeaseInput{Lock: "L", Op: kind, Owner: owner},
			Output: linearize.LeaseOutput{OK: ok, Token: token}}
	}
	h := []linearize.Operation[linearize.LeaseInput, linearize.LeaseOutput]{
		op(1, 1, linearize.Acquire, 11, ms(1000), ms(1000), true, 1),
		op(2, 1, linearize.Renew, 11, ms(1000)+1000, ms(1000)+1000, true, 1),
		op(3, 1, linearize.Renew, 11, ms(1000.5), ms(1001), true, 1),
		op(4, 2, linearize.Acquire, 22, ms(2000), ms(2100), true, 2), // while 11's lease runs
		op(5, 1, linearize.Acquire, 12, ms(2500), ms(2600), false, 0),
		op(6, 1, linearize.Release, 11, ms(2700), ms(2700), true, 0),
	}
	h[4].Unknown = true
	return h
}

// TestReportTimelineInBrowser: a report whose timeline has operations of
// one client at one instant, and an unknown outcome followed by more of
// the same client's operations, drawn in headless Chromium: every bar has
// an area, stays inside its lane and covers no other bar.
func TestReportTimelineInBrowser(t *testing.T) {
	m, err := linearize.NewLeaseModel(5*time.Second, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	h := crowdedLeaseHistory()
	res, err := linearize.Check(context.Background(), m, h, linearize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != linearize.Illegal {
		t.Fatalf("verdict %v, want Illegal (a double grant)", res.Verdict)
	}
	ev := &propertytest.Evidence{Model: linearize.Spec{Kind: linearize.KindLease, TTL: 5 * time.Second, Tolerance: time.Millisecond},
		Lease: h, Result: res, All: true}
	out := checkResult{Verdict: statusViolated, Cells: []cellResult{{Lock: "crafted", Faults: "none",
		Violations: []violationOut{{Property: "exclusivity", Status: statusViolated, Detail: "a double grant", evidence: ev}}}}}
	path := filepath.Join(t.TempDir(), "report.html")
	if err := writeReport(path, out); err != nil {
		t.Fatal(err)
	}
	checkInBrowser(t, path, 1)
}
