package linearize

import (
	"strings"
	"testing"
	"time"
)

// withDeadline returns op with the deadline its holder was told, in
// milliseconds of history time.
func withDeadline(op lop, deadline int64) lop {
	op.Output.Deadline = ms(deadline)
	return op
}

// TestReportedDeadlineEndsTheLease checks that a grant that reported a
// deadline before its TTL reckoning may expire from that deadline on, in
// the lease, semaphore and read-write models, while a second grant inside
// the reported deadline stays a double grant, a deadline past the
// reckoning extends nothing, and a successful renewal holds the lease for
// the TTL from its call whatever deadline it reports (the backend extended
// the key when it said yes).
func TestReportedDeadlineEndsTheLease(t *testing.T) {
	lease, sem, rw := leaseModel(t), semModel(t, 2), rwModel(t)
	// testTTL is 100 ms with a 1 ms tolerance: a grant called at 0 may
	// expire from 99 ms on.
	cases := []struct {
		name string
		h    []lop
		want Verdict
	}{
		{"second grant after the deadline", []lop{
			withDeadline(acquire(0, 1, 1, 0, 10, 1), 50),
			acquire(1, 2, 2, 60, 70, 2),
		}, Ok},
		{"the same without a deadline", []lop{
			acquire(0, 1, 1, 0, 10, 1),
			acquire(1, 2, 2, 60, 70, 2),
		}, Illegal},
		{"second grant inside the deadline", []lop{
			withDeadline(acquire(0, 1, 1, 0, 10, 1), 50),
			acquire(1, 2, 2, 20, 40, 2),
		}, Illegal},
		{"a deadline past the TTL reckoning extends nothing", []lop{
			withDeadline(acquire(0, 1, 1, 0, 10, 1), 500),
			acquire(1, 2, 2, 150, 160, 2),
		}, Ok},
		{"a renewal extends the lease by the TTL from its call", []lop{
			withDeadline(acquire(0, 1, 1, 0, 10, 1), 50),
			leaseCall(1, 1, Renew, 1, 40, 45, true),
			acquire(2, 2, 2, 95, 100, 2),
		}, Illegal},
		{"whatever deadline it reports", []lop{
			withDeadline(acquire(0, 1, 1, 0, 10, 1), 50),
			withDeadline(leaseCall(1, 1, Renew, 1, 40, 45, true), 50),
			acquire(2, 2, 2, 95, 100, 2),
		}, Illegal},
		{"and it ends then", []lop{
			withDeadline(acquire(0, 1, 1, 0, 10, 1), 50),
			leaseCall(1, 1, Renew, 1, 40, 45, true),
			acquire(2, 2, 2, 140, 150, 2),
		}, Ok},
		{"an unknown grant's deadline is not read", []lop{
			acquire(0, 1, 1, 0, 10, 1),
			asUnknown(withDeadline(acquire(1, 2, 2, 20, 30, 0), 25)),
			acquire(2, 3, 3, 60, 70, 3),
		}, Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkWant(t, lease, c.h, c.want)
			checkWant(t, genericOnly(lease), c.h, c.want)
			checkWant(t, rw, c.h, c.want)
			// Two permits: a third holder all along (granted at 0,
			// renewed at 90 ms) makes the semaphore overfull where the
			// mutex has two holders. Its token is below every other
			// grant's.
			third := make([]lop, 0, len(c.h)+1)
			for _, op := range c.h {
				if op.Output.Token != 0 {
					op.Output.Token += 100
				}
				third = append(third, op)
			}
			third = append(third, withDeadline(acquire(len(c.h), 9, 9, 0, 10, 1), 1000),
				leaseCall(len(c.h)+1, 9, Renew, 9, 90, 90, true))
			checkWant(t, sem, third, c.want)
		})
	}
}

// asUnknown marks op as of unknown outcome.
func asUnknown(op lop) lop {
	op.Unknown = true
	return op
}

// TestExplainLeaseReadsDeadlines checks that the words for a double grant
// give the lease's end as its reported deadline when that comes first.
func TestExplainLeaseReadsDeadlines(t *testing.T) {
	h := []lop{
		withDeadline(acquire(0, 1, 1, 0, 10, 1), 50),
		acquire(1, 2, 2, 20, 40, 2),
	}
	got := strings.Join(ExplainLease(h, testTTL, 0), "; ")
	if !strings.Contains(got, "until 50ms at the earliest") {
		t.Errorf("ExplainLease = %q, want the lease's end at its deadline, 50ms", got)
	}
	h[1] = acquire(1, 2, 2, 60, 70, 2)
	if got := ExplainLease(h, testTTL, 0); len(got) != 0 {
		t.Errorf("ExplainLease = %q for a grant after the deadline, want nothing", got)
	}
}

// TestDescribeShowsTheDeadlineRounded checks that a grant's description
// names the deadline its holder was told, rounded as RoundDuration does,
// and that a grant without one reads as before.
func TestDescribeShowsTheDeadlineRounded(t *testing.T) {
	m := leaseModel(t)
	op := acquire(0, 1, 1, 0, 10, 1)
	if got, want := m.DescribeOperation(&op), "acquire(L, owner 1) -> granted, token 1"; got != want {
		t.Errorf("without a deadline: %q, want %q", got, want)
	}
	op.Output.Deadline = 2833333333 // ns
	if got, want := m.DescribeOperation(&op), "acquire(L, owner 1) -> granted, token 1, until 2.8333s"; got != want {
		t.Errorf("with a deadline: %q, want %q", got, want)
	}
	for _, c := range []struct {
		in, want string
	}{{"2.833333333s", "2.8333s"}, {"1.2345678ms", "1.235ms"}, {"-1.00006s", "-1.0001s"}, {"750ns", "750ns"}} {
		d, err := time.ParseDuration(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := RoundDuration(d).String(); got != c.want {
			t.Errorf("RoundDuration(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}
