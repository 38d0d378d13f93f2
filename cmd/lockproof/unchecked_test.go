package main

import (
	"bytes"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockproof/lockproof/propertytest"
)

// flat joins s's words with single spaces, so that a wrapped legend can be
// searched for a sentence.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

// Each cell that cannot check availability gets the reason of its kind of
// backend: the lab's cluster cells, the real servers given by flags, the
// embedded ones, and a cell with no run at all.
func TestAvailabilityUncheckedReason(t *testing.T) {
	for _, c := range clusterCells(clusterKinds()) {
		if got := availabilityUnchecked(&c, minRuns); got != whyCluster {
			t.Errorf("cluster cell %s: %q, want the cluster's reason", c.name(), got)
		}
	}
	reals := 0
	for _, c := range builtinCells(endpoints{redis: "127.0.0.1:6379", redisNodes: []string{"a:1", "b:1", "c:1"}}) {
		if !c.real {
			continue
		}
		reals++
		if got := availabilityUnchecked(&c, minRuns); got != whyFlags {
			t.Errorf("cell %s on a server given by flags: %q", c.name(), got)
		}
	}
	if reals != 2 {
		t.Errorf("%d cells on the servers given, want redislock's and redlock's", reals)
	}
	redis := builtinCells(endpoints{})[0]
	if redis.lock != lockRedis || redis.real {
		t.Fatalf("the first built-in cell is %s, want the embedded redislock", redis.name())
	}
	if got := availabilityUnchecked(&redis, minRuns); got != whyOneServer {
		t.Errorf("embedded %s: %q", redis.name(), got)
	}
	if got := availabilityUnchecked(&redis, 0); got != whyNoRun {
		t.Errorf("a cell without runs: %q", got)
	}
}

// unchecked is a cell whose availability shows "-" for why.
func unchecked(lock, faults, why string) cellResult {
	return cellResult{Lock: lock, Faults: faults, Runs: minRuns, Props: []propResult{
		{Property: string(propertytest.Exclusivity), Status: statusPass, Checked: minRuns},
		{Property: string(propertytest.Availability), Status: statusNotChecked, Why: why},
	}}
}

// The table's legend says why its "-" cells were not checked, and only
// that: a table of cluster cells does not call them one node's, one of
// embedded cells does not speak of clusters, a mixed one names the cells
// of each reason, and a table without "-" has no line for it.
func TestDashLegend(t *testing.T) {
	table := func(cells ...cellResult) string {
		var b bytes.Buffer
		printTable(&b, checkResult{Cells: cells})
		return flat(b.String())
	}
	clusters := table(unchecked(lockEtcd, "leader", whyCluster), unchecked(lockRedis, "failover", whyCluster))
	if !strings.Contains(clusters, "-: availability not checked.") || !strings.Contains(clusters, "Here "+flat(whyCluster)+".") {
		t.Errorf("the cluster cells' legend does not give their reason:\n%s", clusters)
	}
	for _, wrong := range []string{"one server", "one node to the lock", "one-node", "of one node", "etcdlock/leader:"} {
		if strings.Contains(clusters, wrong) {
			t.Errorf("the cluster cells' legend says %q:\n%s", wrong, clusters)
		}
	}
	embedded := table(unchecked(lockZK, "crash", whyOneServer))
	if !strings.Contains(embedded, "Here "+flat(whyOneServer)+".") || strings.Contains(embedded, "cluster") {
		t.Errorf("the embedded cell's legend:\n%s", embedded)
	}
	mixed := table(unchecked(lockZK, "crash", whyOneServer), unchecked(lockZK, "leader", whyCluster),
		unchecked(lockMySQL, "crash", whyOneServer))
	want := "Here zklock/crash, mysqllock/crash: " + flat(whyOneServer) + "; zklock/leader: " + flat(whyCluster) + "."
	if !strings.Contains(mixed, want) {
		t.Errorf("the mixed table's legend lacks %q:\n%s", want, mixed)
	}
	checked := unchecked(lockRedlock, "node-down", "")
	checked.Props[1] = propResult{Property: string(propertytest.Availability), Status: statusPass, Checked: minRuns}
	if none := table(checked); strings.Contains(none, "-: ") {
		t.Errorf("a table without \"-\" explains it:\n%s", none)
	}
	var raw bytes.Buffer
	printTable(&raw, checkResult{Cells: []cellResult{unchecked(lockZK, "crash", whyOneServer), unchecked(lockZK, "leader", whyCluster)}})
	for _, line := range strings.Split(raw.String(), "\n") {
		if len(line) > legendWidth && strings.Contains(line, "availability not checked") {
			t.Errorf("a legend line of %d bytes, over %d: %q", len(line), legendWidth, line)
		}
	}
}

// The HTML report's legend gives the same reason as the table's.
func TestReportDashLegend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.html")
	if err := writeReport(path, checkResult{Cells: []cellResult{unchecked(lockEtcd, "leader", whyCluster)}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := flat(html.UnescapeString(string(b)))
	if !strings.Contains(page, flat(whyCluster)) || strings.Contains(page, "backend of one node") {
		t.Errorf("the report's legend does not give the cluster's reason:\n%s", page)
	}
}

// wrapWords breaks at spaces within the width, keeps a longer word whole,
// and loses no word.
func TestWrapWords(t *testing.T) {
	got := wrapWords("aa bb cc dddddddd e", 5)
	if want := "aa bb\ncc\ndddddddd\ne"; got != want {
		t.Errorf("wrapWords = %q, want %q", got, want)
	}
}
