package main

import (
	_ "embed"
	"fmt"
	"html/template"
	"os"
	"strings"
)

//go:embed report.html
var reportHTML string

var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"cellText":   cellText,
	"faultsText": faultsText,
	"lower":      strings.ToLower,
	"class": func(status string) string {
		return strings.ReplaceAll(strings.ToLower(status), " ", "-")
	},
}).Parse(reportHTML))

// reportViolation is a violation with its timeline rendered, for the page.
type reportViolation struct {
	violationOut
	Cell     string
	Replay   string
	Timeline string // the timeline page itself, shown in a frame
}

// writeReport writes the self-contained HTML report of res to path: the
// table, then every violation with its history and its timeline (each
// timeline page inlined in an iframe's srcdoc, so the file needs nothing
// else to be read).
func writeReport(path string, res checkResult) error {
	var vs []reportViolation
	for _, want := range []string{statusViolated, "expected violation"} {
		for _, c := range res.Cells {
			for _, v := range c.Violations {
				if v.Status != want {
					continue
				}
				rv := reportViolation{violationOut: v, Cell: c.Lock + "/" + c.Faults}
				if v.Status == statusViolated {
					rv.Replay = c.Replay
				}
				if v.evidence != nil {
					rv.Model = v.evidence.Model.String()
					var b strings.Builder
					if err := v.evidence.WriteHTML(&b); err != nil {
						return fmt.Errorf("report: %s: %w", rv.Cell, err)
					}
					rv.Timeline = b.String()
				}
				vs = append(vs, rv)
			}
		}
	}
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	err = reportTmpl.Execute(fh, struct {
		checkResult
		Props      []string
		Violations []reportViolation
		MinRuns    int
		MoreRuns   string
		Dash       string // why the cells showing "-" were not checked
	}{res, propNames(), vs, minRuns, moreRunsHint(res), dashText(res.Cells)})
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

func propNames() []string {
	out := make([]string, len(properties))
	for i, p := range properties {
		out[i] = string(p)
	}
	return out
}
