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

	_ struct{} // keyed literals only
}

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
}

type picture struct {
	Verdict          string
	Summary          string
	Lanes            []picLane
	From, To         int64
	FromText, ToText string // From and To as Picture.Unit shows them
	Ops              []picOp
}

// timeText shows a time of the history in the picture's unit.
func (p Picture) timeText(v int64) string {
	if p.Unit <= 0 {
		return strconv.FormatInt(v, 10)
	}
	return (time.Duration(v) * p.Unit).String()
}

type picLane struct {
	Client int
	Ops    []picOp
}

// layout collects the operations to draw, by call time.
func layout[S, I, O any](model Model[S, I, O], history []Operation[I, O], res *Result, p Picture) (picture, error) {
	m, err := fill(model)
	if err != nil {
		return picture{}, err
	}
	pic := picture{Verdict: res.Verdict.String(), Summary: summary(res)}
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
		o.Width = max(100*float64(end-o.Call)/span, 0.4)
		if _, ok := lanes[o.Client]; !ok {
			lanes[o.Client] = len(pic.Lanes)
			pic.Lanes = append(pic.Lanes, picLane{Client: o.Client})
		}
		l := &pic.Lanes[lanes[o.Client]]
		l.Ops = append(l.Ops, *o)
	}
	slices.SortFunc(pic.Lanes, func(a, b picLane) int { return a.Client - b.Client })
	return pic, nil
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
// position in the linearization) and the model's description.
func WriteText[S, I, O any](w io.Writer, model Model[S, I, O], history []Operation[I, O], res *Result, p Picture) error {
	pic, err := layout(model, history, res, p)
	if err != nil {
		return err
	}
	width := p.Width
	if width <= 0 {
		width = 60
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s — %s\ntime %s .. %s", pic.Verdict, pic.Summary, pic.FromText, pic.ToText)
	if res.Verdict == Illegal {
		b.WriteString("; * counterexample, ! where the search got stuck")
	}
	b.WriteString("\n")
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
		fmt.Fprintf(&b, "%s c%-3d |%s| %sid %d: %s\n", mark, o.Client, bar, rank, o.ID, o.Description)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

//go:embed timeline.html
var timelineHTML string

var timeline = template.Must(template.New("timeline").Parse(timelineHTML))

// WriteHTML renders the result as one self-contained HTML page (inline
// CSS, no script, nothing fetched): a lane per client, each operation a
// bar across [call, return] on a common time axis, hover for details.
// Unknown outcomes are hatched and run to the end of the axis (they may
// take effect any time after their call); the counterexample of an Illegal
// result is red, the operation the search got stuck at outlined, and, when
// Picture.All is set, the other operations are faded. Ok results number
// each bar with its position in the linearization of its partition.
func WriteHTML[S, I, O any](w io.Writer, model Model[S, I, O], history []Operation[I, O], res *Result, p Picture) error {
	pic, err := layout(model, history, res, p)
	if err != nil {
		return err
	}
	return timeline.Execute(w, struct {
		picture
		Fade bool
	}{pic, res.Verdict == Illegal})
}
