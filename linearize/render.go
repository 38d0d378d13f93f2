package linearize

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Picture selects what the renderers draw.
type Picture struct {
	// All draws every operation of the history. By default an Illegal
	// result draws only its counterexample (with the failing partition's
	// other operations left out) and other results draw everything.
	All bool
	// Width is the number of columns of the time axis in text; default 60.
	Width int
	// Unit, when set, is the duration of one unit of the history's times,
	// and times are shown as durations (with time.Nanosecond, 2500000000
	// reads 2.5s). By default they are shown as the plain numbers they are.
	Unit time.Duration
	// LeaseTTL and LeaseTolerance, for a lease-lock history, are the lease
	// model's: the HTML timeline then draws each lease's validity window and
	// marks where two owners' windows overlap, and both renderers name the
	// reason of a violation where the history shows it (ExplainLease).
	LeaseTTL, LeaseTolerance time.Duration
	// Expected heads an Illegal result as an expected violation (one
	// under faults the lock does not claim), not as a plain "Illegal".
	Expected bool

	_ struct{} // keyed literals only
}

// minBarWidth is the narrowest an operation is drawn, in percent of the
// time axis: one that starts and ends at one instant stays visible.
const minBarWidth = 1.2

// picOp is one operation as the renderers see it.
type picOp struct {
	Index      int // history index
	ID, Client int
	Call, Ret  int64
	// CallText, RetText: Call and Ret as Picture.Unit shows them.
	CallText, RetText string
	Unknown           bool
	Cex               bool // in the counterexample
	Blocker           bool // the operation the search got stuck at
	Rank              int  // position in the linearization (1-based), 0 if none
	Description       string
	// Left, Width: the bar, in percent of the time axis (HTML).
	Left, Width float64
	// LabelLeft, LabelAfter: the bar is too narrow for its label, which
	// goes to its left near the right edge (so that it stays in the
	// frame), after it elsewhere.
	LabelLeft, LabelAfter bool
	// Row: the row of its client's lane the bar is drawn in (0 the top);
	// a bar goes down a row where it would cover an earlier one.
	Row int
}

// The rows of a lane (HTML), in pixels: a row's height, an operation's
// and a label's distance from the top of its row.
const (
	rowHeight = 22
	opTop     = 4
	labelTop  = 6
)

// labelCharWidth estimates the width of one character of an outside
// label, in percent of the time axis (11px text on a track about 1000px
// wide), to keep the next bar from being drawn over it.
const labelCharWidth = 0.6

type picture struct {
	Verdict          string
	Heading, Class   string // the page's title and its class (its color)
	Summary          string
	Reasons          []string  // the exact reasons of a violation, where known
	Overlaps         []picSpan // where two owners' lease windows overlap
	Lanes            []picLane
	From, To         int64
	FromText, ToText string // From and To as Picture.Unit shows them
	Ops              []picOp
}

// timeText shows a time of the history in the picture's unit, rounded
// (9.6333s, not 9.633333332s).
func (p Picture) timeText(v int64) string {
	if p.Unit <= 0 {
		return strconv.FormatInt(v, 10)
	}
	return RoundDuration(time.Duration(v) * p.Unit).String()
}

type picLane struct {
	Client int
	Ops    []picOp
	Leases []picSpan // the validity windows of the leases its grants began
	// ends[r] is where row r's last bar (and its outside label) ends.
	ends []float64
}

// place puts o in the first row of the lane where nothing drawn before
// reaches past the start of its bar, and the label it draws to its left:
// operations of one client follow each other in time, but a bar widened
// to stay visible, an unknown outcome drawn to the end, or a label beside
// a short bar would otherwise cover the next.
func (l *picLane) place(o *picOp) {
	const gap = 0.2
	from, to := o.Left, o.Left+o.Width
	label := labelCharWidth * float64(len([]rune(o.Description))+4)
	switch {
	case o.LabelLeft:
		from -= label
	case o.LabelAfter:
		to += label
	}
	o.Row = len(l.ends)
	for r, end := range l.ends {
		if end+gap <= from {
			o.Row = r
			break
		}
	}
	if o.Row == len(l.ends) {
		l.ends = append(l.ends, 0)
	}
	l.ends[o.Row] = to
	l.Ops = append(l.Ops, *o)
}

// Rows is the number of rows the lane's bars take, at least one.
func (l picLane) Rows() int { return max(len(l.ends), 1) }

// picSpan is a stretch of the time axis, in percent, with what it is.
type picSpan struct {
	Left, Width float64
	Title       string
	Cex         bool // began by an operation of the counterexample
}

// layout collects the operations to draw, by call time. A nil res draws
// the whole history without a verdict.
func layout[S, I, O any](model Model[S, I, O], history []Operation[I, O], res *Result, p Picture) (pic picture, err error) {
	m, err := fill(model)
	if err != nil {
		return picture{}, err
	}
	if res == nil {
		res = &Result{} // not checked: drawn as it is
		pic = picture{Verdict: "unchecked", Heading: "History", Class: "Unknown",
			Summary: plural(len(history), "operation", "operations") + ", not checked"}
	} else {
		pic = picture{Verdict: res.Verdict.String(), Heading: res.Verdict.String(), Class: res.Verdict.String(), Summary: summary(res)}
	}
	if res.Verdict == Illegal && p.Expected {
		pic.Heading, pic.Class = "Illegal, as expected (under faults the lock does not claim)", "Expected"
	}
	in := map[int]bool{}
	for _, i := range res.Counterexample {
		in[i] = true
	}
	rank := map[int]int{}
	if res.Verdict == Ok {
		for _, lin := range res.Linearization() {
			for r, i := range lin {
				rank[i] = r + 1
			}
		}
	}
	var idx []int
	if res.Verdict == Illegal && !p.All {
		idx = slices.Clone(res.Counterexample)
	} else {
		for i := range history {
			idx = append(idx, i)
		}
	}
	for _, i := range idx {
		if i < 0 || i >= len(history) {
			return picture{}, fmt.Errorf("%w: result refers to operation %d of a history of %d", ErrInvalidHistory, i, len(history))
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpInt64(history[a].Call, history[b].Call) })
	for n, i := range idx {
		op := &history[i]
		if n == 0 || op.Call < pic.From {
			pic.From = op.Call
		}
		if n == 0 || op.Return > pic.To {
			pic.To = op.Return
		}
		pic.Ops = append(pic.Ops, picOp{
			Index: i, ID: op.ID, Client: op.ClientID, Call: op.Call, Ret: op.Return,
			CallText: p.timeText(op.Call), RetText: p.timeText(op.Return),
			Unknown: op.Unknown, Cex: in[i], Blocker: res.Verdict == Illegal && i == res.Blocker,
			Rank: rank[i], Description: m.DescribeOperation(op),
		})
	}
	pic.FromText, pic.ToText = p.timeText(pic.From), p.timeText(pic.To)
	span := float64(pic.To - pic.From)
	if span <= 0 {
		span = 1
	}
	lanes := map[int]int{}
	for k := range pic.Ops {
		o := &pic.Ops[k]
		o.Left = 100 * float64(o.Call-pic.From) / span
		end := o.Ret
		if o.Unknown {
			end = pic.To // may take effect any time later: drawn to the end
		}
		o.Width = max(100*float64(end-o.Call)/span, minBarWidth)
		o.Left = max(min(o.Left, 100-o.Width), 0) // inside the frame, however short
		// Outside labels for a short history, and in a long one for the
		// counterexample only: more would write over each other.
		outside := o.Width < 25 && (len(pic.Ops) <= 12 || o.Cex || o.Blocker)
		o.LabelLeft = outside && o.Left+o.Width > 60
		o.LabelAfter = outside && !o.LabelLeft
		if _, ok := lanes[o.Client]; !ok {
			lanes[o.Client] = len(pic.Lanes)
			pic.Lanes = append(pic.Lanes, picLane{Client: o.Client})
		}
		pic.Lanes[lanes[o.Client]].place(o)
	}
	if p.LeaseTTL > 0 {
		leasePicture(&pic, history, res, p)
	}
	slices.SortFunc(pic.Lanes, func(a, b picLane) int { return a.Client - b.Client })
	return pic, nil
}

// leasePicture adds the lease windows, their overlaps and the reasons of a
// violation to pic, when history is a lease-lock history.
func leasePicture[I, O any](pic *picture, history []Operation[I, O], res *Result, p Picture) {
	var h []Operation[LeaseInput, LeaseOutput]
	var cex []Operation[LeaseInput, LeaseOutput]
	for _, o := range pic.Ops {
		op := &history[o.Index]
		in, ok1 := any(op.Input).(LeaseInput)
		out, ok2 := any(op.Output).(LeaseOutput)
		if !ok1 || !ok2 {
			return // not a lease-lock history
		}
		lop := Operation[LeaseInput, LeaseOutput]{ID: op.ID, ClientID: op.ClientID, Call: op.Call, Return: op.Return,
			Unknown: op.Unknown, Input: in, Output: out}
		h = append(h, lop)
		if o.Cex {
			cex = append(cex, lop)
		}
	}
	if res.Verdict == Illegal {
		pic.Reasons = ExplainLease(cex, p.LeaseTTL, p.LeaseTolerance)
	}
	span := float64(max(pic.To-pic.From, 1))
	at := func(v int64) float64 { return 100 * float64(min(max(v, pic.From), pic.To)-pic.From) / span }
	type window struct {
		owner           uint64
		lock            string
		from, sure, end int64 // begun at from, held for sure from sure (the return), ends by end
	}
	var ws []window
	lane := map[int]int{}
	for i := range pic.Lanes {
		lane[pic.Lanes[i].Client] = i
	}
	ttl := int64(p.LeaseTTL)
	for i := range h {
		g := &h[i]
		if g.Unknown || !g.Output.OK || g.Input.Op == Release {
			continue
		}
		end := g.Call + ttl
		for k := range h {
			op := &h[k]
			if k == i || op.Input.Owner != g.Input.Owner || op.Input.Lock != g.Input.Lock || op.Call < g.Call {
				continue
			}
			switch {
			case op.Input.Op == Release && (op.Unknown || op.Output.OK):
				end = min(end, op.Return) // released by then
			case op.Input.Op == Renew && !op.Unknown && op.Output.OK:
				end = min(end, op.Call) // the renewal begins a window of its own
			}
		}
		end = max(end, g.Return)
		w := window{owner: g.Input.Owner, lock: g.Input.Lock, from: g.Call, sure: g.Return, end: end}
		ws = append(ws, w)
		what := "lease"
		if g.Input.Op == Renew {
			what = "renewed lease"
		}
		title := fmt.Sprintf("%s of owner %d, token %d: from %s (called) to %s at the latest (TTL %v)",
			what, g.Input.Owner, g.Output.Token, p.timeText(g.Call), p.timeText(end), RoundDuration(p.LeaseTTL))
		if g.Input.Op == Renew {
			title = fmt.Sprintf("%s of owner %d: from %s (called) to %s at the latest (TTL %v)",
				what, g.Input.Owner, p.timeText(g.Call), p.timeText(end), RoundDuration(p.LeaseTTL))
		}
		l := &pic.Lanes[lane[g.ClientID]]
		l.Leases = append(l.Leases, picSpan{Left: at(w.from), Width: max(at(w.end)-at(w.from), minBarWidth/2), Title: title,
			Cex: slices.ContainsFunc(cex, func(c Operation[LeaseInput, LeaseOutput]) bool { return c.ID == g.ID })})
	}
	// Two owners' leases overlap where both were surely held: from each
	// grant's return to its window's end less the tolerance.
	tol := int64(p.LeaseTolerance)
	for i := range ws {
		for j := i + 1; j < len(ws); j++ {
			a, b := ws[i], ws[j]
			if a.owner == b.owner || a.lock != b.lock {
				continue
			}
			from, to := max(a.sure, b.sure), min(a.end-tol, b.end-tol)
			if from >= to {
				continue
			}
			pic.Overlaps = append(pic.Overlaps, picSpan{Left: at(from), Width: max(at(to)-at(from), minBarWidth/2),
				Title: fmt.Sprintf("owners %d and %d both held lock %q from %s to %s", a.owner, b.owner, a.lock, p.timeText(from), p.timeText(to))})
		}
	}
}

func summary(res *Result) string {
	switch res.Verdict {
	case Ok:
		return fmt.Sprintf("linearizable: %s, numbers give the linearization order within a partition",
			plural(len(res.Partitions), "partition", "partitions"))
	case Illegal:
		minimal := "minimal"
		if !res.Minimal {
			minimal = "not fully shrunk"
		}
		key := res.Partitions[res.FailingPartition].Key
		return fmt.Sprintf("not linearizable: partition %q, counterexample of %s (%s)",
			key, plural(len(res.Counterexample), "operation", "operations"), minimal)
	}
	return fmt.Sprintf("unknown: %v", res.Cause)
}

// plural is "1 thing" or "n things".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// WriteText renders the result for a terminal: one line per operation, by
// call time, with its client, a bar on a common time axis ('[===]'; an
// unknown outcome is '[~~~' to the end of the axis), marks ('*' in the
// counterexample, '!' the operation the search got stuck at, '#n' the
// position in the linearization), its call and return times and the
// model's description. A nil res draws the history without a verdict.
func WriteText[S, I, O any](w io.Writer, model Model[S, I, O], history []Operation[I, O], res *Result, p Picture) error {
	pic, err := layout(model, history, res, p)
	if err != nil {
		return err
	}
	illegal := res != nil && res.Verdict == Illegal
	width := p.Width
	if width <= 0 {
		width = 60
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s — %s\ntime %s .. %s", pic.Heading, pic.Summary, pic.FromText, pic.ToText)
	if illegal {
		b.WriteString("; * counterexample, ! where the search got stuck")
	}
	b.WriteString("\n")
	for _, r := range pic.Reasons {
		fmt.Fprintf(&b, "why: %s\n", r)
	}
	for _, o := range pic.Ops {
		bar := []byte(strings.Repeat(" ", width))
		lo := int(o.Left / 100 * float64(width-1))
		hi := min(int((o.Left+o.Width)/100*float64(width-1)), width-1)
		fill := byte('=')
		if o.Unknown {
			fill = '~'
		}
		if !o.Unknown && hi <= lo {
			lo, hi = min(lo, width-2), min(lo, width-2)+1
		}
		for x := lo; x <= hi; x++ {
			bar[x] = fill
		}
		bar[lo] = '['
		if !o.Unknown && hi > lo {
			bar[hi] = ']'
		}
		mark := " "
		switch {
		case o.Blocker:
			mark = "!"
		case o.Cex:
			mark = "*"
		}
		rank := ""
		if o.Rank > 0 {
			rank = fmt.Sprintf("#%d ", o.Rank)
		}
		fmt.Fprintf(&b, "%s c%-3d |%s| %sid %d [%s, %s]: %s\n", mark, o.Client, bar, rank, o.ID, o.CallText, o.RetText, o.Description)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

//go:embed timeline.html
var timelineHTML string

var timeline = template.Must(template.New("timeline").Funcs(template.FuncMap{
	// labelRight is where a label drawn to the left of its bar ends, as
	// CSS right, in percent.
	"labelRight": func(o picOp) float64 { return 100 - o.Left + 0.5 },
	// labelLeft is where a label drawn after its bar starts, in percent.
	"labelLeft": func(o picOp) float64 { return o.Left + o.Width + 0.5 },
	// opTop, labelTop: where a bar and its outside label are drawn from
	// the top of the lane, in pixels, by the row the bar was given.
	"opTop":    func(o picOp) int { return opTop + o.Row*rowHeight },
	"labelTop": func(o picOp) int { return labelTop + o.Row*rowHeight },
	// trackHeight is a lane's height in pixels; leaseTop, where its lease
	// windows are drawn, below its last row.
	"trackHeight": func(l picLane, leased bool) int {
		h := l.Rows()*rowHeight + opTop
		if leased {
			h += 8
		}
		return h
	},
	"leaseTop": func(l picLane) int { return l.Rows()*rowHeight + opTop - 1 },
}).Parse(timelineHTML))

// WriteHTML renders the result as one self-contained HTML page (inline
// CSS, no script, nothing fetched): a lane per client, each operation a
// bar across [call, return] on a common time axis, hover for details.
// Unknown outcomes are hatched and run to the end of the axis (they may
// take effect any time after their call); the counterexample of an Illegal
// result is red, the operation the search got stuck at outlined, and, when
// Picture.All is set, the other operations are faded. Ok results number
// each bar with its position in the linearization of its partition. A
// nil res draws the history without a verdict.
func WriteHTML[S, I, O any](w io.Writer, model Model[S, I, O], history []Operation[I, O], res *Result, p Picture) error {
	pic, err := layout(model, history, res, p)
	if err != nil {
		return err
	}
	leased := false
	for _, l := range pic.Lanes {
		leased = leased || len(l.Leases) > 0
	}
	return timeline.Execute(w, struct {
		picture
		Fade, Leased bool
	}{pic, res != nil && res.Verdict == Illegal, leased})
}
