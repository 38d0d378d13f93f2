package linearize

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A double grant, drawn: client 2 is granted at 3.2 s while client 1's
// lease, granted at 1 s with a TTL of 5 s, still runs; a zero-length
// operation; a stuck operation at the very end.
func doubleGrantPicture(t *testing.T) (string, Result) {
	t.Helper()
	m, err := NewLeaseModel(5*time.Second, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	h := []lop{
		acquire(1, 1, 11, 1000, 1000, 1), // starts and ends at one instant
		acquire(2, 2, 22, 3200, 3300, 2), // granted while 11's lease runs
		{ID: 3, ClientID: 3, Call: ms(3300) + 1, Return: ms(3300) + 1, // at the very end, zero length
			Input: LeaseInput{Lock: "L", Op: Release, Owner: 33}, Output: LeaseOutput{}},
	}
	res := check(t, m, h)
	if res.Verdict != Illegal {
		t.Fatalf("verdict %v", res.Verdict)
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, m, h, &res, Picture{All: true, Unit: time.Nanosecond, LeaseTTL: 5 * time.Second, LeaseTolerance: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	return buf.String(), res
}

var barStyle = regexp.MustCompile(`class="op[^"]*"[^>]*style="top:[0-9]+px;left:([0-9.]+)%;width:([0-9.]+)%`)

func TestTimelineBarsStayVisibleAndInside(t *testing.T) {
	page, _ := doubleGrantPicture(t)
	bars := barStyle.FindAllStringSubmatch(page, -1)
	if len(bars) != 3 {
		t.Fatalf("%d bars, want 3", len(bars))
	}
	for _, b := range bars {
		left, _ := strconv.ParseFloat(b[1], 64)
		width, _ := strconv.ParseFloat(b[2], 64)
		if width < minBarWidth {
			t.Errorf("bar at %v%% is %v%% wide: a sliver", left, width)
		}
		if left < 0 || left+width > 100.001 {
			t.Errorf("bar [%v%%, %v%%] leaves the frame", left, left+width)
		}
	}
}

// TestTimelineKeepsOneClientsBarsApart: operations of one client that
// follow each other closely (two at one instant a microsecond apart, one
// right after them) or come after an unknown outcome (drawn to the end)
// go down a row each rather than over each other; one far from the others
// stays in the top row.
func TestTimelineKeepsOneClientsBarsApart(t *testing.T) {
	m, err := NewLeaseModel(5*time.Second, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	h := []lop{
		acquire(1, 1, 11, 1000, 1000, 1),
		leaseCall(2, 1, Renew, 11, 1000, 1000, true),
		leaseCall(3, 1, Renew, 11, 1001, 1001, true),
		leaseCall(4, 1, Release, 11, 3000, 3000, true),
		acquire(5, 1, 12, 3500, 3600, 0),
		leaseCall(6, 1, Release, 12, 3700, 3800, true),
		acquire(7, 2, 22, 5000, 5000, 2),
	}
	h[1].Call, h[1].Return = h[1].Call+1000, h[1].Return+1000
	h[4].Unknown = true
	res := check(t, m, h)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, m, h, &res, Picture{All: true, Unit: time.Millisecond, LeaseTTL: 5 * time.Second, LeaseTolerance: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	tops := regexp.MustCompile(`title="id (\d+) [^"]*"`).FindAllStringSubmatchIndex(buf.String(), -1)
	row := map[string]string{}
	for _, m := range tops {
		id := buf.String()[m[2]:m[3]]
		styles := regexp.MustCompile(`style="top:([0-9]+)px`).FindAllStringSubmatch(buf.String()[max(m[0]-200, 0):m[0]], -1)
		if styles == nil {
			t.Fatalf("operation %s has no top", id)
		}
		row[id] = styles[len(styles)-1][1] // its own: the last before its title
	}
	for id, top := range map[string]string{"1": "4", "2": "26", "3": "48", "7": "4"} {
		if row[id] != top {
			t.Errorf("operation %s drawn %spx from its lane's top, want %spx (rows: %v)", id, row[id], top, row)
		}
	}
	if row["6"] == row["5"] {
		t.Errorf("operation 6 drawn in the row of the unknown outcome before it, which runs to the end (rows: %v)", row)
	}
	if !strings.Contains(buf.String(), `style="height:78px"`) { // 3 rows of 22px, 4px, 8px of lease windows
		t.Errorf("client 1's lane is not three rows high")
	}
}

func TestTimelineDrawsLeaseWindowsAndTheirOverlap(t *testing.T) {
	page, _ := doubleGrantPicture(t)
	if n := strings.Count(page, `class="lease`); n != 2 {
		t.Errorf("%d lease windows drawn, want 2 (one per grant)", n)
	}
	if !strings.Contains(page, `class="overlap"`) {
		t.Error("the overlap of the two leases is not drawn")
	}
	for _, want := range []string{
		"client 2 granted (token 2) at 3.3s while client 1&#39;s lease (granted at 1s, TTL 5s) still ran",
		"lease of owner 11, token 1",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestTimelineRoundsTimes(t *testing.T) {
	for _, c := range []struct {
		ns   int64
		want string
	}{{9633333332, "9.6333s"}, {2500000000, "2.5s"}, {1234567, "1.235ms"}, {1500, "1.5µs"}, {0, "0s"}} {
		if got := (Picture{Unit: time.Nanosecond}).timeText(c.ns); got != c.want {
			t.Errorf("timeText(%d) = %q, want %q", c.ns, got, c.want)
		}
	}
}

func TestExplainLease(t *testing.T) {
	h := []lop{acquire(1, 1, 11, 0, 1, 2), acquire(2, 2, 22, 8000, 8001, 1)}
	got := strings.Join(ExplainLease(h, 5*time.Second, time.Millisecond), "\n")
	if !strings.Contains(got, "token 1 granted after token 2") {
		t.Errorf("reasons %q", got)
	}
	legal := []lop{acquire(1, 1, 11, 0, 1, 1), leaseCall(2, 1, Release, 11, 2, 3, true), acquire(3, 2, 22, 4, 5, 2)}
	if r := ExplainLease(legal, 5*time.Second, time.Millisecond); len(r) != 0 {
		t.Errorf("a legal hand-over explained as %q", r)
	}
}

// An expected violation is headed as such, not with a red "Illegal".
func TestTimelineExpected(t *testing.T) {
	m := leaseModel(t)
	h := []lop{acquire(1, 1, 11, 0, 2, 1), acquire(2, 2, 22, 20, 21, 2)}
	res := check(t, m, h)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, m, h, &res, Picture{Expected: true}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if strings.Contains(page, `<h1 class="Illegal">`) || !strings.Contains(page, "expected") {
		t.Errorf("an expected violation headed %q", regexp.MustCompile(`<h1[^<]*</h1>`).FindString(page))
	}
}
