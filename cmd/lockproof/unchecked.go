package main

import "strings"

// Why a cell shows "-" for availability (propResult.Why). The suite's probe
// stops a minority of the independent nodes a lock takes a majority of
// (propertytest.Backend's Nodes and StopNode), and only the embedded
// Redlock backends declare such nodes; every other cell skips it, for the
// reason its kind of backend gives.
const (
	whyOneServer = "the embedded backend is one node to the lock (one server, or a primary and the replica " +
		"that replaces it at a failover), which has no minority of nodes to lose"
	whyCluster = "on a lab cluster (-clusters) the members replicate one service, one node to the probe; " +
		"the cell's own faults strike the members instead (the leader; on Redis the primary), " +
		"under exclusivity and deadlock freedom"
	whyFlags = "on servers given by flags, which the suite did not start and cannot stop"
	whyNoRun = "no run of the cell finished"
)

// whyUnreached is why a cell on real servers may check symmetry or
// progress in none of its runs, however many it makes.
const whyUnreached = "their probes run only in quiet moments (symmetry after a foreign call with no fault " +
	"since the holder's grant, progress once the lock is free with nothing in doubt), which this cell's faults " +
	"left none of; more runs may not reach them. The lock history check still judged every foreign call " +
	"and every refused acquire these runs made (see docs/check.md)"

// onServers reports whether c runs on servers the suite did not embed: a
// lab cluster (-clusters) or servers given by flags.
func (c *cell) onServers() bool { return c.kind != nil || c.real }

// availabilityUnchecked says why c checked availability in none of its
// runs.
func availabilityUnchecked(c *cell, runs int) string {
	switch {
	case runs == 0:
		return whyNoRun
	case c.kind != nil:
		return whyCluster
	case c.real:
		return whyFlags
	}
	return whyOneServer
}

// legendWidth is where the legend's lines break.
const legendWidth = 115

// dashLegend is the legend's line for the cells of the table that show
// "-", wrapped; "" when no cell shows one.
func dashLegend(cells []cellResult) string {
	why := dashText(cells)
	if why == "" {
		return ""
	}
	return wrapWords("-: "+why, legendWidth)
}

// dashText says why the cells that show "-" were not checked, naming the
// cells when the reasons differ; "" when no cell shows one.
func dashText(cells []cellResult) string {
	var whys []string
	byWhy := map[string][]string{}
	for _, c := range cells {
		for _, p := range c.Props {
			if p.Status != statusNotChecked {
				continue
			}
			if byWhy[p.Why] == nil {
				whys = append(whys, p.Why)
			}
			byWhy[p.Why] = append(byWhy[p.Why], c.Lock+"/"+c.Faults)
		}
	}
	if len(whys) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("availability not checked. Its probe stops a minority of the independent nodes a lock takes a majority of, " +
		"which only the embedded cells on several Redis nodes have (redlock's, and mutants on them). Here ")
	for i, why := range whys {
		if i > 0 {
			b.WriteString("; ")
		}
		if len(whys) > 1 {
			b.WriteString(strings.Join(byWhy[why], ", ") + ": ")
		}
		b.WriteString(why)
	}
	b.WriteString(".")
	return b.String()
}

// wrapWords breaks s into lines of at most width bytes at spaces (a
// longer word stays whole on a line of its own).
func wrapWords(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		switch {
		case i == 0:
		case n+1+len(w) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}
