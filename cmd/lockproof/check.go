package main

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/propertytest"
)

// Exit status of check and replay on an error: a cell could not be checked
// (a backend did not start, a run broke down without a verdict), or the
// results could not be written. The cause is printed.
const exitError = 3

// verdictError is check's verdict when a cell could not be checked.
const verdictError = "ERROR"

// defaultReport is where check writes its HTML report unless -html says
// otherwise: the current directory (.gitignore covers it in this repository).
const defaultReport = "lockproof-report.html"

// properties are the table's columns, in order.
var properties = []propertytest.Property{
	propertytest.Exclusivity, propertytest.Symmetry, propertytest.DeadlockFreedom, propertytest.Availability, propertytest.Progress,
}

// checkConfig is what one check run needs beyond its cells.
type checkConfig struct {
	seed   uint64        // the matrix seed: the low 40 bits of every cell's seeds
	budget time.Duration // wall time for the whole matrix, split evenly by cell
	runs   int           // exact runs per cell; 0: the budget decides
	chunk  int           // runs per rapid call in budget mode
	steps  int           // actions per run on average
	outDir string        // where cells write their timelines
	shrink time.Duration // wall-time backstop on minimizing one failure (shrinkBackstop)
}

// Cell statuses of a property.
const (
	statusPass       = "pass"
	statusViolated   = "VIOLATED"
	statusExpected   = "expected"
	statusNotChecked = "not checked"
	statusTooFew     = "too few runs"
)

// minRuns is the fewest runs that must check a property for it to pass;
// in budget mode every cell makes at least that many, even past its share.
const minRuns = 5

// propResult is one property of one cell.
type propResult struct {
	Property string `json:"property"`
	// Status is pass, VIOLATED, expected (violated, but only under faults
	// the lock does not claim) or "not checked" (no run could check it).
	Status string `json:"status"`
	// Checked counts the runs that checked it; Expected those that found
	// an expected violation.
	Checked  int `json:"checked_runs"`
	Expected int `json:"expected_runs"`
	// Why says why a property not checked was not (availability).
	Why string `json:"why,omitempty"`
	// Unreached marks a property at too few runs that no run of a cell on
	// real servers checked: more runs are no estimate of what it needs.
	Unreached bool `json:"unreached,omitempty"`
}

// violationOut is one violation, as reported.
type violationOut struct {
	Property  string   `json:"property"`
	Status    string   `json:"status"`
	Detail    string   `json:"detail"`
	Unclaimed []string `json:"unclaimed_faults,omitempty"`
	History   string   `json:"history,omitempty"`
	// File is the violation's history file (written with -histories),
	// Recheck the lockproof history command that checks it again, and
	// Model the model the history was checked against, which the file
	// names.
	File    string `json:"history_file,omitempty"`
	Recheck string `json:"recheck,omitempty"`
	Model   string `json:"history_model,omitempty"`
	// Verdict is the history checker's on that history (Ok, Illegal,
	// Unknown): a named check's finding may rest on a history the model
	// finds Ok. Rechecked is lockproof history's verdict on the file, read
	// back after the run, for an expected violation (recheckExpected).
	Verdict   string `json:"history_verdict,omitempty"`
	Rechecked string `json:"rechecked_verdict,omitempty"`

	evidence *propertytest.Evidence // the history and the checker's result, for the report
}

// cellResult is one row of the table.
type cellResult struct {
	Lock   string `json:"lock"`
	Faults string `json:"faults"`
	// Unclaimed are the kinds of fault the cell's runs could inject that
	// the lock does not claim (propertytest.Report.Unclaimed).
	Unclaimed []string `json:"unclaimed_fault_kinds,omitempty"`
	About     string   `json:"about"`
	Claims    string   `json:"claims"`
	// Share is the cell's part of -budget in seconds, by its weight (0
	// with -runs).
	Share float64 `json:"share_seconds,omitempty"`
	// Runs counts the runs made, up to the first that violated a claimed
	// property; Shrinking, the runs rapid then made to minimize it.
	Runs      int          `json:"runs"`
	Shrinking int          `json:"shrinking_runs,omitempty"`
	Seconds   float64      `json:"seconds"`
	Props     []propResult `json:"properties"`
	// Violated is true when a property the lock claims was violated; Seed
	// and Replay then replay the minimal failing run.
	Violated bool   `json:"violated"`
	Seed     uint64 `json:"seed,omitempty"`
	Replay   string `json:"replay,omitempty"`
	// Log is the file that keeps the log of the cell's runs up to and
	// through the violation's minimization (rapid's and the suite's lines:
	// the faults struck, each probe's error), written when a claimed
	// property was violated and the cell has a histories' directory.
	Log string `json:"log,omitempty"`
	// Undecided counts history checks that ran out of time.
	Undecided  int            `json:"undecided_checks,omitempty"`
	Violations []violationOut `json:"violations,omitempty"`
	// WantedRuns estimates how many more runs the cell's properties checked
	// by too few runs need (runsWanted), and WantedSeconds how long they
	// would take at the cell's speed.
	WantedRuns    int     `json:"wanted_runs,omitempty"`
	WantedSeconds float64 `json:"wanted_seconds,omitempty"`
	// Error says why the cell could not be checked.
	Error string `json:"error,omitempty"`
	// Mutant names the property a deliberately broken lock must break.
	Mutant string `json:"mutant_breaks,omitempty"`
	// Cluster names the lab cluster the cell ran on (check -clusters).
	Cluster string `json:"cluster,omitempty"`
	// Stated is the outcome the plan stated for a cell on a lab cluster
	// before the run, and Shown whether its runs showed it: the stated
	// violation came, or no claimed property was violated.
	Stated string `json:"stated_outcome,omitempty"`
	Shown  bool   `json:"stated_outcome_shown,omitempty"`
}

// checkResult is the whole matrix.
type checkResult struct {
	Seed    uint64       `json:"seed"`
	Budget  string       `json:"budget,omitempty"`
	Runs    int          `json:"runs_per_cell,omitempty"`
	Started time.Time    `json:"started"`
	Seconds float64      `json:"seconds"`
	Cells   []cellResult `json:"cells"`
	// Verdict is "pass", "VIOLATED" or "ERROR" (a cell could not be
	// checked: its Error says why); Exit the exit status.
	Verdict string `json:"verdict"`
	Exit    int    `json:"exit"`
	// Note is said once of the whole run (on the clusters: that their
	// replays are best effort).
	Note string `json:"note,omitempty"`
}

// checkFlags are check's options.
type checkFlags struct {
	locks, faults string
	seed          uint64
	budget        time.Duration
	runs          int
	steps         int
	json          bool
	html          string
	outDir        string
	ep            endpoints
	clusters      bool
}

func checkCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lockproof check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f checkFlags
	fs.StringVar(&f.locks, "locks", "", "comma-separated locks to check (default: every built-in lock; mutant/<name> or mutants adds deliberately broken ones; redis-semaphore, etcd-semaphore, consul-semaphore, zk-semaphore or semaphores adds the semaphores of 2 permits, redis-rwmutex, etcd-rwmutex, consul-rwmutex, zk-rwmutex or rwlocks the read-write locks, and redislock-reentrant, … or reentrant the built-in locks with an owner per client re-entering, on the embedded backends, which the default leaves out to keep its budget)")
	fs.StringVar(&f.faults, "faults", "", "comma-separated fault scenarios (default: all)")
	fs.Uint64Var(&f.seed, "seed", 0, "matrix seed (default: random, printed)")
	fs.DurationVar(&f.budget, "budget", 90*time.Second, fmt.Sprintf("wall time for the whole matrix, split between cells, each with its own deadline, "+
		"a cell in real time (embedded etcd) taking %d shares and every other cell one; a cell makes at least %d runs, even past its share, "+
		"and up to twice its share for a property checked by fewer runs, so the run may take longer: the default buys etcdlock 6 or 7 runs "+
		"and the other cells 15 to 100 each on 2 cores", realTimeWeight, minRuns))
	fs.IntVar(&f.runs, "runs", 0, fmt.Sprintf("exact runs per cell instead of the budget (with -seed: an exact replay of the matrix); below %d, no property passes: too few runs", minRuns))
	fs.IntVar(&f.steps, "steps", 30, "average actions per run")
	fs.BoolVar(&f.json, "json", false, "print the results as JSON on stdout instead of the table")
	fs.StringVar(&f.html, "html", defaultReport, "write the HTML report here (empty: none)")
	fs.StringVar(&f.outDir, "histories", "", "write each violation's history here as JSON, which lockproof history reads (default: none)")
	fs.StringVar(&f.outDir, "out", "", "the old name of -histories")
	f.ep.flags(fs, "check %s on %s instead of %s, in real time")
	fs.BoolVar(&f.clusters, "clusters", false, fmt.Sprintf("check the locks on the lab's real replicated clusters instead (etcdlock on a 3-member etcd, zklock on a 3-server ZooKeeper, "+
		"their leaders isolated, killed and paused; redislock through Redis Sentinel, its primary cut off and failed over, not claimed; "+
		"redlock on 5 independent Redis nodes, a majority restarted one by one with their data, and without, not claimed), "+
		"one cluster at a time, inside a network namespace with no route out: needs root, ip, nft, unshare, nsenter "+
		"and the servers (Debian's etcd-server, zookeeper, redis-server); -locks and -faults pick among these cells; %d runs per cell unless -runs or -budget; "+
		"violations' histories go to a new temporary directory unless -histories", clusterRuns))
	if code, ok := parseArgs(fs, args, "lockproof check [flags]", 0, stderr); !ok {
		return code
	}
	bad := flagProblems{cmd: "lockproof check"}
	bad.need(f.runs >= 0, "runs", f.runs, "want 0 (the budget decides) or more")
	bad.need(f.runs > 0 || f.budget > 0, "budget", f.budget, "want a positive duration (or -runs)")
	bad.need(f.steps >= 1, "steps", f.steps, "want at least 1 action per run")
	f.ep.deployProblems(&bad)
	cells, err := selectCells(f.ep, f.clusters, f.locks, f.faults)
	if err != nil {
		bad.add(err.Error())
	}
	if f.clusters {
		for _, name := range endpointFlags {
			bad.need(!flagGiven(fs, name), name, fs.Lookup(name).Value, "-clusters starts the lab's own servers: leave it out")
		}
	}
	bad.output("html", f.html)
	bad.outDir(histFlagName(fs), f.outDir)
	if bad.report(stderr) {
		return exitUsage
	}
	if f.clusters {
		if code, ok := enterLab(cells, &f, fs, stderr); !ok {
			return code
		}
	}
	if f.seed == 0 {
		f.seed = randomSeed()
	}
	cfg := checkConfig{seed: f.seed, budget: f.budget, runs: f.runs, chunk: 10, steps: f.steps, outDir: f.outDir, shrink: shrinkBackstop}
	if f.clusters {
		fmt.Fprintln(stderr, clusterPlan(cells, cfg))
	}
	res := runMatrix(cells, cfg, newProgress(stderr, cells, cfg))
	recheckExpected(&res)
	if f.clusters {
		res.Note = bestEffortNote
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(stderr, "lockproof check: %v\n", err)
			return exitError
		}
	} else {
		printTable(stdout, res)
	}
	if f.html != "" {
		if err := writeReport(f.html, res); err != nil {
			fmt.Fprintf(stderr, "lockproof check: %v\n", err)
			return exitError
		}
		fmt.Fprintf(stderr, "report: %s\n", f.html)
	}
	return res.Exit
}

// randomSeed is a fresh matrix seed (40 bits, never 0).
func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])%(1<<40-1) + 1
}

// cellSeed is the seed of chunk k of cell c: the cell's id in the top 16
// bits, then the matrix seed, then k, with room below for rapid's own
// increments (it adds the run number to the seed of every run).
func cellSeed(c *cell, matrix uint64, k int) uint64 {
	low := (matrix%(1<<40) + uint64(k)<<24) % (1 << 48)
	return uint64(c.id())<<48 | low
}

// runMatrix runs every cell in turn.
func runMatrix(cells []cell, cfg checkConfig, p *progress) checkResult {
	res := checkResult{Seed: cfg.seed, Started: time.Now(), Verdict: statusPass, Exit: exitOK}
	if cfg.runs > 0 {
		res.Runs = cfg.runs
	} else {
		res.Budget = cfg.budget.String()
	}
	p.begin()
	total := 0
	for i := range cells {
		total += cells[i].weightOf()
	}
	weightLeft := total
	var life *clusterLife
	if len(cells) > 0 && cells[0].kind != nil {
		life = newClusterLife(p.note)
	}
	for i := range cells {
		// Every cell gets its share of the budget, by its weight, as its
		// own deadline, whatever the cells before it spent: a slow cell
		// that overran its share (its minimum runs, or minimizing a
		// failure) does not starve the rest. What earlier cells left
		// unspent goes to the rest.
		w := cells[i].weightOf()
		share := cfg.budget * time.Duration(w) / time.Duration(total)
		if cfg.runs == 0 {
			left := cfg.budget - time.Since(res.Started)
			share = max(share, left*time.Duration(w)/time.Duration(weightLeft))
		}
		weightLeft -= w
		p.startCell(i, share)
		if life != nil {
			cells[i].factory = clusterFactory(life, cells, i, p.note)
		}
		cr := runCell(&cells[i], cfg, share, p)
		if life != nil {
			if err := life.after(cells, i, p.note); err != nil && cr.Error == "" {
				cr.Error = err.Error()
			}
		}
		if cfg.runs == 0 {
			cr.Share = share.Seconds()
		}
		res.Cells = append(res.Cells, cr)
		p.endCell(&cr)
		switch {
		case cr.Violated:
			res.Verdict, res.Exit = statusViolated, exitIllegal
		case cr.Error != "" && res.Exit == exitOK:
			res.Verdict, res.Exit = verdictError, exitError
		}
	}
	if life != nil {
		if err := life.done(); err != nil && res.Exit == exitOK {
			res.Verdict, res.Exit = verdictError, exitError
			p.note(err.Error())
		}
	}
	p.end()
	res.Seconds = time.Since(res.Started).Seconds()
	return res
}

var unsafeFile = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// runCell runs one cell: in budget mode, one run to time it, then up to
// minRuns runs whatever they take, then chunks of at most cfg.chunk runs,
// as many as fit what is left of its share of the budget; with cfg.runs,
// one call of exactly that many runs. It stops at the first violation of a
// claimed property: rapid has then minimized it. A property checked by
// fewer than minRuns runs is reported as too few runs, not as a pass.
func runCell(c *cell, cfg checkConfig, share time.Duration, p *progress) cellResult {
	start := time.Now()
	cr := cellResult{Lock: c.lock, Faults: c.faults, About: c.about, Claims: claimsOf(c.opts), Mutant: string(c.breaks)}
	if c.kind != nil {
		cr.Cluster = c.kind.name
	}
	opts := c.opts
	if cfg.outDir != "" {
		opts.OutDir = filepath.Join(cfg.outDir, unsafeFile.ReplaceAllString(c.name(), "_"))
	}
	checked := map[propertytest.Property]int{}
	expected := map[propertytest.Property]int{}
	var lastExpected *propertytest.Violation
	var failed *propertytest.Report
	checks := 1 // in budget mode, the first chunk measures how long a run takes
	if cfg.runs > 0 {
		checks = cfg.runs
	}
	// A cell stated to show a violation runs one run at a time with
	// -runs, and stops at the first that shows it: run j (from 0) has the
	// seed it has among -runs runs made at once, where rapid adds j to
	// the seed of run j-1, so 0+1+…+j to the first's.
	oneByOne := c.shows != "" && cfg.runs > 0
	if oneByOne {
		checks = 1
	}
	for k := 0; ; k++ {
		seed := cellSeed(c, cfg.seed, k)
		if oneByOne {
			seed = cellSeed(c, cfg.seed, 0) + uint64(cr.Runs*(cr.Runs+1)/2)
		}
		rep, err := propertytest.RunStandalone(c.factory, opts, propertytest.Standalone{
			Name: unsafeFile.ReplaceAllString(c.name(), "-"), Checks: checks, Seed: seed,
			Steps: c.stepsOf(cfg.steps), ShrinkTime: cfg.shrink,
		})
		if rep != nil {
			if rep.Failed && rep.FirstFailure > 0 {
				cr.Runs += rep.FirstFailure
				cr.Shrinking += rep.Runs - rep.FirstFailure
			} else {
				cr.Runs += rep.Runs
			}
			cr.Undecided += rep.Undecided
			for _, k := range rep.Unclaimed {
				if !slices.Contains(cr.Unclaimed, string(k)) {
					cr.Unclaimed = append(cr.Unclaimed, string(k))
				}
			}
			for prop, n := range rep.Checked {
				checked[prop] += n
			}
			for prop, n := range rep.Expected {
				expected[prop] += n
			}
			if rep.ExpectedExample != nil {
				lastExpected = rep.ExpectedExample
			}
			p.runs(cr.Runs)
		}
		if err != nil {
			cr.Error = strings.TrimPrefix(err.Error(), propertytest.ErrNoVerdict.Error()+": ")
			break
		}
		if rep.Failed {
			failed = rep
			break
		}
		if c.shows != "" && expected[c.shows] > 0 {
			break // the stated outcome came
		}
		if oneByOne && cr.Runs < cfg.runs && rep.Runs > 0 {
			continue
		}
		if cfg.runs > 0 || cr.Runs == 0 {
			break
		}
		if cr.Runs < minRuns {
			checks = minRuns - cr.Runs
			continue
		}
		spent := time.Since(start)
		perRun := max(spent/time.Duration(cr.Runs), time.Microsecond)
		fit := int((share - spent) / perRun)
		if fit < 1 {
			// The share is spent. The properties checked too rarely to pass
			// get the runs their rates so far say they need, while the cell
			// stays within twice its share.
			more := runsWanted(checked, expected, cr.Runs, !c.onServers())
			if more == 0 || spent+time.Duration(more)*perRun > 2*share {
				break
			}
			fit = more
		}
		checks = min(fit, cfg.chunk) // chunks stay short, so that a slow cell stops near its share
	}
	cr.Seconds = time.Since(start).Seconds()
	if cr.Runs > 0 {
		cr.WantedRuns = runsWanted(checked, expected, cr.Runs, !c.onServers())
		cr.WantedSeconds = float64(cr.WantedRuns) * cr.Seconds / float64(cr.Runs)
	}
	if c.kind != nil {
		cr.Stated = c.statedOutcome()
		cr.Shown = failed == nil && cr.Error == "" && cr.Runs > 0 && (c.shows == "" || expected[c.shows] > 0)
	}
	broken := map[propertytest.Property]bool{}
	if failed != nil {
		cr.Violated, cr.Seed = true, failed.Seed
		replay := "lockproof replay "
		if c.kind != nil {
			replay += "-clusters "
		}
		cr.Replay = fmt.Sprintf("%s%d", replay, failed.Seed)
		if shrinkCutShort(failed, c.opts, cfg.shrink) {
			cr.Replay = fmt.Sprintf("%s-shrinkruns %d %d", replay, failed.ShrinkCandidates, failed.Seed)
		}
		if opts.OutDir != "" {
			cr.Log = saveLog(opts.OutDir, c.name(), failed.Output)
		}
		for _, v := range failed.Violations {
			broken[v.Property] = broken[v.Property] || !v.Expected
			cr.Violations = append(cr.Violations, violationOf(&v))
		}
	}
	if lastExpected != nil && failed == nil {
		cr.Violations = append(cr.Violations, violationOf(lastExpected))
	}
	for _, prop := range properties {
		pr := propResult{Property: string(prop), Checked: checked[prop], Expected: expected[prop]}
		switch {
		case broken[prop]:
			pr.Status = statusViolated
		case expected[prop] > 0:
			pr.Status = statusExpected
		case checked[prop] >= minRuns:
			pr.Status = statusPass
		case checked[prop] == 0 && cr.Runs > 0 && c.onServers() && prop != propertytest.Availability:
			pr.Status, pr.Unreached = statusTooFew, true
		case prop == propertytest.Availability && checked[prop] == 0:
			// Every run that finishes checks availability on a backend of
			// several independent nodes, and none on any other.
			pr.Status, pr.Why = statusNotChecked, availabilityUnchecked(c, cr.Runs)
		default:
			pr.Status = statusTooFew
		}
		cr.Props = append(cr.Props, pr)
	}
	return cr
}

// saveLog writes the log of a cell's runs into dir, as name's log file,
// and returns its path; "" (the log lost, said on stderr) when it cannot.
func saveLog(dir, name, log string) string {
	path := filepath.Join(dir, unsafeFile.ReplaceAllString(name, "-")+".log")
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(path, []byte(log), 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "lockproof check: keeping the log of %s: %v\n", name, err)
		return ""
	}
	return path
}

// runsWanted estimates how many more runs the properties of a cell checked
// by fewer than minRuns of its runs need to reach minRuns, at the rate each
// was checked so far; a property never checked is given as many runs
// again when guessUnseen, else none: on real servers a run is costly and
// its faults are frequent, so a rate of zero says nothing of how many runs
// would reach the check. Availability, which a cell without independent
// nodes to stop never checks, and properties with an expected violation,
// which are not passes to make, want none.
func runsWanted(checked, expected map[propertytest.Property]int, runs int, guessUnseen bool) int {
	want := 0
	for _, p := range properties {
		n := checked[p]
		if n >= minRuns || expected[p] > 0 || (p == propertytest.Availability && n == 0) {
			continue
		}
		if n == 0 {
			if guessUnseen {
				want = max(want, runs)
			}
			continue
		}
		want = max(want, ((minRuns-n)*runs+n-1)/n)
	}
	return want
}

func violationOf(v *propertytest.Violation) violationOut {
	out := violationOut{Property: string(v.Property), Status: v.Status(), Detail: v.Detail,
		Unclaimed: v.Unclaimed, History: v.History, evidence: v.Evidence}
	if v.Evidence != nil {
		out.Verdict, out.Model = v.Evidence.Result.Verdict.String(), v.Evidence.Model.String()
	}
	if _, err := os.Stat(v.File); err == nil && v.Evidence != nil {
		out.File, out.Recheck = v.File, recheckCommand(v.File)
	}
	return out
}

// recheckCommand is the command line that checks the history file path
// again, against the model the file names.
func recheckCommand(path string) string { return "lockproof history " + path }

// histFlagName is the name the histories' directory was given on the
// command line: -histories, or its old name -out.
func histFlagName(fs *flag.FlagSet) string {
	if flagGiven(fs, "out") {
		return "out"
	}
	return "histories"
}

// faultsText is a cell's FAULTS column: its scenario, and the kinds of
// fault in it the lock does not claim, whose violations are expected.
func faultsText(c cellResult) string {
	var extra []string
	for _, k := range c.Unclaimed {
		if k != c.Faults {
			extra = append(extra, k)
		}
	}
	switch {
	case len(c.Unclaimed) == 0:
		return c.Faults
	case len(extra) == 0:
		return c.Faults + " (not claimed)"
	}
	return fmt.Sprintf("%s + %s (not claimed)", c.Faults, strings.Join(extra, ", "))
}

// printTable writes the lock × property table and what to do next.
func printTable(w io.Writer, res checkResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "LOCK\tFAULTS\tRUNS")
	for _, p := range properties {
		fmt.Fprintf(tw, "\t%s", strings.ToUpper(string(p)))
	}
	fmt.Fprintln(tw)
	for _, c := range res.Cells {
		fmt.Fprintf(tw, "%s\t%s\t%d", c.Lock, faultsText(c), c.Runs)
		for _, p := range c.Props {
			fmt.Fprintf(tw, "\t%s", cellText(c, p))
		}
		if c.Error != "" {
			fmt.Fprintf(tw, "\tERROR: %s", c.Error)
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nseed %d, %s, %.1fs.\n%s\n", res.Seed, plural(len(res.Cells), "cell", "cells"), res.Seconds, legendFor(res.Cells))
	if res.Note != "" {
		fmt.Fprintf(w, "%s.\n", res.Note)
	}
	printStated(w, res)
	printRechecks(w, res)
	for _, c := range res.Cells {
		if c.Violated {
			fmt.Fprintf(w, "\n%s/%s: VIOLATED (claims: %s). Replay: %s\n", c.Lock, c.Faults, c.Claims, c.Replay)
			fmt.Fprintf(w, "  (no lockproof binary? go install ./cmd/lockproof, or in the repository: go run ./cmd/%s)\n", c.Replay)
			if c.Log != "" {
				fmt.Fprintf(w, "  the runs' log: %s\n", c.Log)
			}
			for _, v := range c.Violations {
				if v.Status != statusViolated {
					continue
				}
				fmt.Fprintf(w, "  %s: %s\n", v.Property, v.Detail)
				if v.History != "" {
					fmt.Fprintf(w, "%s\n", indent(v.History, "    "))
				}
			}
		}
	}
	tooFew := 0
	for _, c := range res.Cells {
		for _, p := range c.Props {
			if p.Status == statusTooFew {
				tooFew++
			}
		}
	}
	switch res.Exit {
	case exitOK:
		fmt.Fprint(w, "\nverdict: pass: no lock violated a property it claims")
		if tooFew > 0 {
			fmt.Fprintf(w, " (%s of the table checked by too few runs to pass)", plural(tooFew, "property", "properties"))
		}
		fmt.Fprintln(w)
		if hint := moreRunsHint(res); hint != "" {
			fmt.Fprintln(w, hint)
		}
	case exitIllegal:
		fmt.Fprintln(w, "\nverdict: VIOLATED: a lock broke a property it claims")
	default:
		failed := 0
		for _, c := range res.Cells {
			if c.Error != "" {
				failed++
			}
		}
		fmt.Fprintf(w, "\nverdict: ERROR: %s could not be checked (the cause is in its row)\n", plural(failed, "cell", "cells"))
	}
}

// moreRunsHint says, for each cell that left properties at too few runs,
// how many more runs its rates so far say they want, and a command that
// checks that cell alone with them (-budget, or -runs with -runs); empty
// when no cell did.
func moreRunsHint(res checkResult) string {
	var b strings.Builder
	for _, c := range res.Cells {
		var few, unreached []string
		for _, p := range c.Props {
			switch {
			case p.Status == statusTooFew && p.Unreached:
				unreached = append(unreached, p.Property)
			case p.Status == statusTooFew:
				few = append(few, p.Property)
			}
		}
		if len(unreached) > 0 && c.Mutant == "" {
			fmt.Fprintf(&b, "never reached: %s/%s (%s) in %s on real servers: %s\n",
				c.Lock, c.Faults, strings.Join(unreached, ", "), plural(c.Runs, "run", "runs"), whyUnreached)
		}
		if len(few) == 0 || c.Mutant != "" || c.WantedRuns == 0 {
			continue
		}
		more := fmt.Sprintf("-runs %d", c.Runs+c.WantedRuns)
		if res.Budget != "" {
			// A cell alone gets the whole budget, and up to as much again
			// for its rare properties.
			need := time.Duration((c.Seconds + c.WantedSeconds) / 2 * float64(time.Second))
			more = fmt.Sprintf("-budget %v", max((need+time.Minute-1).Truncate(time.Minute), time.Minute))
		}
		if c.Cluster != "" {
			more += " -clusters"
		}
		fmt.Fprintf(&b, "too few runs: %s/%s (%s) wants about %d more runs: lockproof check -locks %s -faults %s %s\n",
			c.Lock, c.Faults, strings.Join(few, ", "), c.WantedRuns, c.Lock, c.Faults, more)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func cellText(c cellResult, p propResult) string {
	switch p.Status {
	case statusViolated:
		return fmt.Sprintf("VIOLATED (seed %d)", c.Seed)
	case statusExpected:
		return fmt.Sprintf("expected (%d/%d runs)", p.Expected, c.Runs)
	case statusNotChecked:
		return "-"
	case statusTooFew:
		return fmt.Sprintf("too few runs (%d)", p.Checked)
	}
	return p.Status
}

// cellLegend and propLegend explain the table's cells, as the HTML
// report's legend does; legendFor puts the line for "-" between them.
var (
	cellLegend = fmt.Sprintf(`pass: checked by %[1]d runs or more, never violated; VIOLATED: a property the lock claims was broken;
expected (n/m runs): broken only under faults the lock does not claim; too few runs (n): checked by n runs,
fewer than %[1]d, never violated: not a pass, and not a finding either: the lock may break it in runs not made
(the line under the verdict says what -budget would check it). FAULTS names the cell's scenario and,
"(not claimed)", the faults in it the lock does not claim to survive: what breaks under those alone is expected.
`, minRuns)
	propLegend = `progress is a property of its own, apart from deadlock freedom: with nothing wrong, a holder's Unlock and Renew
must succeed and a free lock be granted; deadlock freedom asks only that a lock left by its holders comes free by
TTL + slack (+ the backend's recovery time: elections, failovers), which a lock whose every Unlock fails still does.
` + faultKindLegend()
	legend = cellLegend + propLegend
)

// legendFor is the legend of a table of cells: with a line saying why
// its "-" cells were not checked, if it has any.
func legendFor(cells []cellResult) string {
	if dash := dashLegend(cells); dash != "" {
		return cellLegend + dash + "\n" + propLegend
	}
	return legend
}

// faultKinds says in a few words what each fault kind injects, for the
// legend; a kind chaos adds without a line here fails the tests.
var faultKinds = map[chaos.Kind]string{
	chaos.KindCrash:     "a client dies holding",
	chaos.KindPause:     "a holder stalls past its lease",
	chaos.KindPartition: "a link loses or holds messages",
	chaos.KindLatency:   "a link delays its bytes",
	chaos.KindReset:     "a link resets or refuses connections",
	chaos.KindNodeDown:  "a node killed, restarted with its data",
	chaos.KindNodeKill:  "a node killed, restarted without what it had not made durable",
	chaos.KindNodePause: "a node frozen, then resumed",
	chaos.KindFailover:  "a primary replaced by a replica behind it",
	chaos.KindClockJump: "a node's clock jumps forward",
	chaos.KindClockSkew: "a node's clock runs ahead or behind",
}

// faultKindLegend is the legend's line of fault kinds, in chaos's order.
func faultKindLegend() string {
	var b strings.Builder
	b.WriteString("fault kinds, which a cell's claims name (propertytest.Options.Claims): ")
	for i, k := range chaos.Kinds() {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", k, faultKinds[k])
	}
	b.WriteString(".")
	return b.String()
}

// cellSummary is a cell's row in a few words, for the progress line: its
// verdict, and every property that did not simply pass.
func cellSummary(c *cellResult) string {
	switch {
	case c.Violated:
		return "VIOLATED, replay: " + c.Replay
	case c.Error != "":
		return "ERROR: " + c.Error
	}
	var notes []string
	for _, p := range c.Props {
		if p.Status == statusExpected || p.Status == statusTooFew {
			notes = append(notes, p.Property+": "+cellText(*c, p))
		}
	}
	if len(notes) == 0 {
		return statusPass
	}
	return "no claimed property violated; " + strings.Join(notes, "; ")
}

func indent(s, pre string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pre + strings.TrimLeft(l, " ")
	}
	return strings.Join(lines, "\n")
}

// shrinkBackstop bounds, in wall time, the minimization of a failure by
// check and replay alike. What binds first, on an in-process backend, is
// the suite's bound by runs (propertytest.Options.ShrinkRuns), so that
// check and replay shrink a seed to the same history whatever the load.
const shrinkBackstop = 30 * time.Second

// shrinkCutShort reports whether the wall-time bound ended rep's minimization
// before its bound by runs did: the runs were slow (a history the checker
// takes seconds on), and a replay bounded by time alone would stop at
// another candidate on a machine of another speed or load. replay's
// -shrinkruns then stops it where check stopped.
func shrinkCutShort(rep *propertytest.Report, o propertytest.Options, bound time.Duration) bool {
	runs := o.ShrinkRuns
	if runs == 0 {
		runs = propertytest.DefaultShrinkRuns
	}
	return rep.ShrinkTime >= bound && rep.ShrinkCandidates < runs
}

// replayShrinkBound is replay's wall-time bound on minimizing under
// -shrinkruns, which binds first: a backstop, not a bound.
const replayShrinkBound = 30 * time.Minute

// flagGiven reports whether the command line set fs's flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// replayCmd re-runs the one run a seed printed by check names.
func replayCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lockproof replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var ep endpoints
	out := fs.String("histories", "", "write the violations' histories here as JSON, which lockproof history reads (default: a new temporary directory, kept)")
	fs.StringVar(out, "out", "", "the old name of -histories")
	steps := fs.Int("steps", 30, "average actions per run (as given to check)")
	shrinkRuns := fs.Int("shrinkruns", 0, fmt.Sprintf("minimize the failure with this many shrink candidates and no %v bound, as check prints when that bound cut its minimization short (default: at most %d candidates within %v)", shrinkBackstop, propertytest.DefaultShrinkRuns, shrinkBackstop))
	ep.flags(fs, "the servers check ran %[1]s on (%[2]s), if any")
	onClusters := fs.Bool("clusters", false, "the seed is of a cell of check -clusters: start that cell's cluster in the lab (as check -clusters does, with its needs) and replay there; "+
		"best effort: the suite's steps and the fault schedule replay exactly, the servers' timers do not")
	if code, ok := parseArgs(fs, args, "lockproof replay [flags] <seed>", 1, stderr); !ok {
		return code
	}
	bad := flagProblems{cmd: "lockproof replay"}
	bad.need(*steps >= 1, "steps", *steps, "want at least 1 action per run")
	bad.need(*shrinkRuns >= 0, "shrinkruns", *shrinkRuns, "want a number of candidates ≥ 0")
	bad.outDir(histFlagName(fs), *out)
	ep.deployProblems(&bad)
	if *onClusters {
		for _, name := range endpointFlags {
			bad.need(!flagGiven(fs, name), name, fs.Lookup(name).Value, "-clusters replays on the lab's own servers: leave it out")
		}
	}
	if bad.report(stderr) {
		return exitUsage
	}
	seed, err := strconv.ParseUint(fs.Arg(0), 0, 64)
	if err != nil || seed == 0 {
		fmt.Fprintf(stderr, "lockproof replay: %q is not a seed printed by lockproof check\n", fs.Arg(0))
		return exitUsage
	}
	cells := allCells(ep)
	if *onClusters {
		cells = clusterCells(clusterKinds())
	}
	at := slices.IndexFunc(cells, func(c cell) bool { return uint64(c.id()) == seed>>48 })
	if at < 0 {
		if *onClusters {
			fmt.Fprintf(stderr, "lockproof replay: seed %d names no cell of check -clusters (cell id %#04x)\n", seed, seed>>48)
		} else {
			fmt.Fprintf(stderr, "lockproof replay: seed %d names no cell of this lockproof (cell id %#04x); was check run on real servers (-redis, -redis-sentinel, -redis-nodes, -etcd, -consul, -mysql, -zk), on -clusters or with -nemesis? Give replay the same flags.\n", seed, seed>>48)
		}
		return exitUsage
	}
	c := &cells[at]
	factory := c.factory
	if *onClusters {
		if code, ok := enterSandbox("lockproof replay -clusters", cells[at:at+1], stderr); !ok {
			return code
		}
		note := func(s string) { fmt.Fprintln(stderr, s) }
		life := newClusterLife(note)
		defer func() {
			if err := life.done(); err != nil {
				fmt.Fprintf(stderr, "lockproof replay: %v\n", err)
			}
		}()
		factory = clusterFactory(life, cells, at, note)
		fmt.Fprintln(stdout, bestEffortNote)
	}
	dir := *out
	if dir == "" {
		if dir, err = os.MkdirTemp("", "lockproof-replay-"); err != nil {
			fmt.Fprintf(stderr, "lockproof replay: %v\n", err)
			return exitError
		}
	}
	opts := c.opts
	opts.OutDir = dir
	bound := shrinkBackstop
	switch {
	case flagGiven(fs, "shrinkruns") && *shrinkRuns == 0:
		bound = time.Nanosecond // rapid looks at the bound before each candidate
	case *shrinkRuns > 0:
		opts.ShrinkRuns, bound = *shrinkRuns, replayShrinkBound
	}
	fmt.Fprintf(stdout, "replaying %s (%s) from seed %d\n", c.name(), c.about, seed)
	rep, err := propertytest.RunStandalone(factory, opts, propertytest.Standalone{
		Name: unsafeFile.ReplaceAllString(c.name(), "-"), Checks: 1, Seed: seed, Steps: c.stepsOf(*steps), ShrinkTime: bound,
	})
	if err != nil {
		fmt.Fprintf(stderr, "lockproof replay: %v\n", err)
		return exitError
	}
	if !rep.Failed {
		for _, v := range rep.Violations {
			fmt.Fprintf(stdout, "%s\n", v)
		}
		fmt.Fprintln(stdout, "did not reproduce: the run kept every claimed property (a failure that depends on wall-time settling may not replay under other load)")
		return exitOK
	}
	for _, v := range rep.Violations {
		fmt.Fprintf(stdout, "\n%s\n", v)
	}
	fmt.Fprintln(stdout, "\nreproduced: VIOLATED")
	return exitIllegal
}
