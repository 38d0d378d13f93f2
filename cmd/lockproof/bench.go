package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/lockbench"
)

// benchFlags are bench's options.
type benchFlags struct {
	waiters     []int
	n           int
	uncontended int
	runs        int
	batches     int
	hold        time.Duration
	cellTime    time.Duration
	redis       string
	zk          string
	backends    []benchBackend
	json, html  string
	noisy       float64
}

// Measurement is one library's numbers in one run.
type Measurement struct {
	Backend string `json:"backend"` // redis, etcd, consul, zk
	Lib     string `json:"lib"`
	Run     int    `json:"run"`
	Waiters int    `json:"waiters"` // 0: uncontended
	// Acquisitions made: under contention fewer than -n when -cell-time ran out.
	Acquisitions int     `json:"acquisitions"`
	P50Ms        float64 `json:"p50_ms"` // cycle latency, or hand-off
	P99Ms        float64 `json:"p99_ms"`
	AcqPerSec    float64 `json:"acq_per_sec,omitempty"`
	CmdsPerAcq   float64 `json:"cmds_per_acq"` // requests on etcd, Consul and ZooKeeper
	// WakeupsPerHandoff is, per hand-off, the watch events the workers'
	// clients received on etcd and ZooKeeper, the blocking queries that
	// returned on Consul (nil on Redis and uncontended).
	WakeupsPerHandoff *float64 `json:"wakeups_per_handoff,omitempty"`
	AllocsPerAcq      float64  `json:"allocs_per_acq"`
	SelfHandoff       float64  `json:"self_handoff_pct,omitempty"`
	// Batches are the run's batches of this cell, in the order measured,
	// each one's own p50 and throughput: the peers' ratios pair them with
	// lockproof's batch of the same number, measured just before or after.
	Batches []Batch `json:"batches,omitempty"`
}

// Batch is one batch of a Measurement (see benchCell).
type Batch struct {
	Acquisitions int     `json:"acquisitions"`
	P50Ms        float64 `json:"p50_ms"`
	AcqPerSec    float64 `json:"acq_per_sec,omitempty"`
}

// BenchReport is what bench writes with -json.
type BenchReport struct {
	// Backends are the backends measured, in order, and what each was.
	Backends     []string          `json:"backends"`
	About        map[string]string `json:"about"`
	Runs         int               `json:"runs"`
	Measurements []Measurement     `json:"measurements"`
	Warnings     []string          `json:"warnings,omitempty"`
}

func bench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lockproof bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f benchFlags
	waiters := fs.String("waiters", "4,16,64", "contenders per run, comma-separated")
	fs.IntVar(&f.n, "n", 400, "acquisitions per contended run")
	fs.IntVar(&f.uncontended, "uncontended", 1000, "lock+unlock cycles per uncontended run")
	fs.IntVar(&f.runs, "runs", 3, "runs of the whole table; medians are reported")
	fs.IntVar(&f.batches, "batches", 4, "batches per cell and run, in which the libraries take turns")
	fs.DurationVar(&f.hold, "hold", 100*time.Microsecond, "how long each holder keeps the lock")
	fs.DurationVar(&f.cellTime, "cell-time", 30*time.Second, "start no more acquisitions in a contended run after this long (0: no limit)")
	backends := fs.String("backends", "redis,etcd,consul,zk", "backends to measure, comma-separated: redis, etcd (embedded), consul (miniconsul), zk (minizk)")
	semaphores := fs.Bool("semaphores", false, "also measure lockproof's semaphore of one permit on each backend, beside its mutex")
	rwlocks := fs.Bool("rwlocks", false, "also measure the writers of lockproof's read-write lock on each backend that has one (and on etcd those of experimental/recipes's RWMutex), beside its mutex")
	fs.StringVar(&f.redis, "redis", "", "a real Redis host:port instead of embedded miniredis")
	fs.StringVar(&f.zk, "zk", "", "a real ZooKeeper host:port instead of in-process minizk (its maxSessionTimeout must allow 10s)")
	fs.StringVar(&f.json, "json", "", "write the measurements as JSON to this file")
	fs.StringVar(&f.html, "html", "", "write an HTML page with an SVG chart to this file")
	fs.Float64Var(&f.noisy, "noisy", 0.25, "warn when a median's runs, or a peer's per-run ratios to lockproof, spread more than this fraction")
	if code, ok := parseArgs(fs, args, "lockproof bench [flags]", 0, stderr); !ok {
		return code
	}
	bad := flagProblems{cmd: "lockproof bench"}
	var err error
	if f.backends, err = parseBackends(*backends); err != nil {
		bad.add(err.Error())
	}
	if *semaphores {
		for i := range f.backends {
			f.backends[i].libs = append(slices.Clone(f.backends[i].libs), libSemaphore)
		}
	}
	if *rwlocks {
		for i := range f.backends {
			f.backends[i].libs = append(slices.Clone(f.backends[i].libs), f.backends[i].rwLibs...)
		}
	}
	if f.waiters, err = parseInts(*waiters); err != nil {
		bad.need(false, "waiters", strconv.Quote(*waiters), err.Error())
	}
	bad.need(f.n >= 1, "n", f.n, "want at least 1 acquisition")
	bad.need(f.uncontended >= 1, "uncontended", f.uncontended, "want at least 1 cycle")
	bad.need(f.runs >= 1, "runs", f.runs, "want at least 1 run")
	bad.need(f.batches >= 1, "batches", f.batches, "want at least 1 batch")
	bad.need(f.hold >= 0, "hold", f.hold, "want a duration ≥ 0")
	bad.need(f.cellTime >= 0, "cell-time", f.cellTime, "want a duration ≥ 0 (0: no limit)")
	bad.need(f.noisy >= 0 && !math.IsInf(f.noisy, 0), "noisy", f.noisy, "want a fraction ≥ 0, such as 0.25")
	bad.hostPort("zk", f.zk)
	bad.need(f.zk == "" || slices.ContainsFunc(f.backends, func(b benchBackend) bool { return b.name == "zk" }),
		"zk", f.zk, "names a ZooKeeper server, but -backends leaves zk out")
	bad.output("json", f.json)
	bad.output("html", f.html)
	if bad.report(stderr) {
		return exitUsage
	}
	if f.zk != "" {
		if err := probeZK(f.zk); err != nil {
			fmt.Fprintf(stderr, "lockproof bench: -zk %s: %v\n", f.zk, err)
			return exitIllegal
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	rep, err := runBench(ctx, f, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof bench: %v\n", err)
		return exitIllegal
	}
	printBench(stdout, rep)
	if f.json != "" {
		if err := writeFile(f.json, func(w io.Writer) error {
			e := json.NewEncoder(w)
			e.SetIndent("", "  ")
			return e.Encode(rep)
		}); err != nil {
			fmt.Fprintf(stderr, "lockproof bench: %v\n", err)
			return exitUsage
		}
	}
	if f.html != "" {
		if err := writeFile(f.html, func(w io.Writer) error { return writeBenchHTML(w, rep) }); err != nil {
			fmt.Fprintf(stderr, "lockproof bench: %v\n", err)
			return exitUsage
		}
	}
	return exitOK
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 2 {
			return nil, fmt.Errorf("%q is not an integer ≥ 2", strings.TrimSpace(part))
		}
		out = append(out, n)
	}
	return out, nil
}

func parseBackends(s string) ([]benchBackend, error) {
	var out []benchBackend
	for _, name := range strings.Split(s, ",") {
		b, ok := backendNamed(strings.TrimSpace(name))
		if !ok {
			names := make([]string, len(benchBackends))
			for i, b := range benchBackends {
				names[i] = b.name
			}
			return nil, fmt.Errorf("-backends: no backend %q (%s)", name, strings.Join(names, ", "))
		}
		if !slices.ContainsFunc(out, func(o benchBackend) bool { return o.name == b.name }) {
			out = append(out, b)
		}
	}
	return out, nil
}

func writeFile(path string, write func(io.Writer) error) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(fh); err != nil {
		_ = fh.Close()
		return err
	}
	return fh.Close()
}

// runBench measures every library of every backend f.runs times. Within a
// run the libraries of a backend take turns batch by batch in every cell
// (see benchCell), so that load from outside the bench falls on all of
// them alike, and a peer's ratio to lockproof is the median of its
// per-run ratios (see ratios). Each library gets a fresh server in each
// run.
func runBench(ctx context.Context, f benchFlags, progress io.Writer) (BenchReport, error) {
	rep := BenchReport{Runs: f.runs, About: map[string]string{}}
	for _, be := range f.backends {
		rep.Backends = append(rep.Backends, be.name)
	}
	for run := 1; run <= f.runs; run++ {
		for _, be := range f.backends {
			ms, about, err := benchRun(ctx, f, be, run, progress)
			if err != nil {
				return rep, fmt.Errorf("%s: %w", be.name, err)
			}
			rep.About[be.name] = about
			rep.Measurements = append(rep.Measurements, ms...)
		}
	}
	rep.Warnings = append(noiseWarnings(rep, f.noisy), ratioWarnings(rep, f.noisy)...)
	rep.Warnings = append(rep.Warnings, cutShort(rep, f)...)
	return rep, nil
}

// benchRun is run number run of backend be: a fresh server for each of its
// libraries, then every cell (uncontended, then each contention level)
// with the libraries interleaved.
func benchRun(ctx context.Context, f benchFlags, be benchBackend, run int, progress io.Writer) (_ []Measurement, about string, err error) {
	srvs := make([]benchServer, 0, len(be.libs))
	defer func() {
		for i, srv := range srvs {
			if cerr := srv.close(); err == nil && cerr != nil {
				err = fmt.Errorf("%s: closing the server: %w", be.libs[i], cerr)
			}
		}
	}()
	names := make([]string, len(be.libs))
	for i, lib := range be.libs {
		srv, err := be.start(f)
		if err != nil {
			return nil, "", fmt.Errorf("%s: starting the server: %w", lib, err)
		}
		srvs = append(srvs, srv)
		names[i] = fmt.Sprintf("lockproof-bench-%d-%s", run, locks.NewOwner()[:8])
	}
	var out []Measurement
	for _, w := range append([]int{0}, f.waiters...) {
		fmt.Fprintf(progress, "run %d/%d: %s on %s, libraries interleaved\n", run, f.runs, waitersName(w), be.name)
		ms, err := benchCell(ctx, f, srvs, be.libs, names, w)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", waitersName(w), err)
		}
		for i := range ms {
			ms[i].Backend, ms[i].Run = be.name, run
		}
		out = append(out, ms...)
	}
	return out, srvs[0].about(), nil
}

// benchCell measures one cell (w waiters, 0: uncontended) of every library,
// libs[i] on srvs[i] and lock names[i]: the cell's acquisitions are cut
// into f.batches batches, and the libraries take turns batch by batch, the
// first of each round rotating, so that a burst of outside load lands on
// every library about as often. Each library's batches add up to one
// Measurement.
func benchCell(ctx context.Context, f benchFlags, srvs []benchServer, libs, names []string, w int) ([]Measurement, error) {
	tallies := make([]tally, len(libs))
	workers := make([][]lockbench.Worker, len(libs))
	for i, lib := range libs {
		suffix := "-u"
		if w > 0 {
			suffix = fmt.Sprintf("-w%d", w)
		}
		ws, done, err := srvs[i].workers(lib, names[i]+suffix, max(w, 1))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		defer done()
		workers[i] = ws
		if w == 0 {
			if _, err := lockbench.Uncontended(ctx, ws[0], 10); err != nil { // warm-up
				return nil, fmt.Errorf("%s: %w", lib, err)
			}
		}
	}
	total := f.n
	if w == 0 {
		total = f.uncontended
	}
	// A contended batch gives every worker a turn at least: with fewer
	// acquisitions than workers, some would never queue.
	batches := min(max(f.batches, 1), total/max(w, 1))
	batches = max(batches, 1)
	for b := range batches {
		size := total*(b+1)/batches - total*b/batches
		for k := range libs {
			i := (b + k) % len(libs)
			var err error
			if w == 0 {
				err = tallies[i].uncontended(ctx, srvs[i], workers[i][0], size)
			} else {
				err = tallies[i].contended(ctx, srvs[i], workers[i],
					lockbench.Contention{Acquisitions: size, Hold: f.hold, Budget: f.cellTime / time.Duration(batches), Turns: true})
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", libs[i], err)
			}
		}
	}
	out := make([]Measurement, len(libs))
	for i, lib := range libs {
		out[i] = tallies[i].measurement(w)
		out[i].Lib = lib
	}
	return out, nil
}

// tally adds up one library's batches in one cell.
type tally struct {
	lat      []time.Duration // cycle latencies uncontended, hand-offs under contention
	acq      int
	elapsed  time.Duration
	reqs     int64
	wake     int64 // -1: not counted
	allocs   uint64
	self     int
	handoffs int
	batches  []Batch
}

// uncontended adds n lock+unlock cycles of one worker.
func (t *tally) uncontended(ctx context.Context, srv benchServer, w lockbench.Worker, n int) error {
	reqs, allocs := srv.requests(), mallocs()
	lat, err := lockbench.Uncontended(ctx, w, n)
	if err != nil {
		return err
	}
	t.reqs += srv.requests() - reqs
	t.allocs += mallocs() - allocs
	t.lat = append(t.lat, lat...)
	t.acq += n
	t.batches = append(t.batches, Batch{Acquisitions: n, P50Ms: ms(lockbench.Percentile(lat, 50))})
	return nil
}

// contended adds one contended batch.
func (t *tally) contended(ctx context.Context, srv benchServer, ws []lockbench.Worker, c lockbench.Contention) error {
	reqs, wakeups, allocs := srv.requests(), srv.wakeups(), mallocs()
	res, err := lockbench.Contend(ctx, ws, c)
	if err != nil {
		return err
	}
	t.reqs += srv.requests() - reqs
	t.allocs += mallocs() - allocs
	if wakeups < 0 {
		t.wake = -1
	} else if t.wake >= 0 {
		t.wake += srv.wakeups() - wakeups
	}
	t.lat = append(t.lat, res.Handoffs...)
	t.acq += res.Acquisitions
	t.elapsed += res.Elapsed
	t.self += res.SelfHandoffs
	t.handoffs += len(res.Handoffs)
	t.batches = append(t.batches, Batch{Acquisitions: res.Acquisitions, P50Ms: ms(lockbench.Percentile(res.Handoffs, 50)),
		AcqPerSec: res.AcqPerSec()})
	return nil
}

// measurement is what the batches added up to, at w waiters.
func (t *tally) measurement(w int) Measurement {
	slices.Sort(t.lat)
	n := float64(max(t.acq, 1))
	m := Measurement{
		Waiters:      w,
		Acquisitions: t.acq,
		P50Ms:        ms(lockbench.Percentile(t.lat, 50)),
		P99Ms:        ms(lockbench.Percentile(t.lat, 99)),
		CmdsPerAcq:   float64(t.reqs) / n,
		AllocsPerAcq: float64(t.allocs) / n,
		Batches:      t.batches,
	}
	if w == 0 {
		return m
	}
	if t.elapsed > 0 {
		m.AcqPerSec = float64(t.acq) / t.elapsed.Seconds()
	}
	if t.handoffs > 0 {
		m.SelfHandoff = 100 * float64(t.self) / float64(t.handoffs)
		if t.wake >= 0 {
			per := float64(t.wake) / float64(t.handoffs)
			m.WakeupsPerHandoff = &per
		}
	}
	return m
}

// benchOne measures one cell of lib on srv in one batch (BenchmarkBench's
// cells).
func benchOne(ctx context.Context, f benchFlags, srv benchServer, lib, name string, w int) (Measurement, error) {
	f.batches = 1
	ms, err := benchCell(ctx, f, []benchServer{srv}, []string{lib}, []string{name}, w)
	if err != nil {
		return Measurement{}, err
	}
	return ms[0], nil
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// row is the medians of one (library, waiters) cell, or of a peer's
// per-run ratios to lockproof in it; wake is -1 where nothing was counted.
type row struct{ p50, p99, acq, cmds, allocs, wake float64 }

// rowOf is one measurement's figures as a row.
func rowOf(m Measurement) row {
	r := row{p50: m.P50Ms, p99: m.P99Ms, acq: m.AcqPerSec, cmds: m.CmdsPerAcq, allocs: m.AllocsPerAcq, wake: -1}
	if m.WakeupsPerHandoff != nil {
		r.wake = *m.WakeupsPerHandoff
	}
	return r
}

// fields lists a row's figures, so that they can be taken one at a time.
func (r *row) fields() []*float64 {
	return []*float64{&r.p50, &r.p99, &r.acq, &r.cmds, &r.allocs, &r.wake}
}

// medianRow is the median of rs, figure by figure; a figure that is
// negative (not counted) in any row is -1.
func medianRow(rs []row) row {
	var out row
	for i, f := range out.fields() {
		xs := make([]float64, 0, len(rs))
		for _, r := range rs {
			xs = append(xs, *r.fields()[i])
		}
		*f = median(xs)
		if len(xs) == 0 || slices.Min(xs) < 0 {
			*f = -1
		}
	}
	return out
}

type cellKey struct {
	lib string
	w   int
}

// medians returns backend's cells by library and waiters, and the waiters
// measured (0: uncontended).
func medians(rep BenchReport, backend string) (map[string]map[int]row, []int) {
	vals := map[cellKey][]row{}
	seen := map[int]bool{}
	for _, m := range rep.Measurements {
		if m.Backend != backend {
			continue
		}
		vals[cellKey{m.Lib, m.Waiters}] = append(vals[cellKey{m.Lib, m.Waiters}], rowOf(m))
		seen[m.Waiters] = true
	}
	out := map[string]map[int]row{}
	for k, rs := range vals {
		if out[k.lib] == nil {
			out[k.lib] = map[int]row{}
		}
		out[k.lib][k.w] = medianRow(rs)
	}
	ws := make([]int, 0, len(seen))
	for w := range seen {
		ws = append(ws, w)
	}
	sort.Ints(ws)
	return out, ws
}

// ratios returns, for every library of backend but base, its ratios to
// base, cell by cell: p50 and acq/s the median of the ratios of all its
// batches to base's batches of the same number in the same run, measured
// next to each other (see benchCell); the other figures the median of the
// runs' ratios. Two figures measured side by side share most of the
// outside load that the medians of each library's runs, taken apart, would
// each carry. A figure is -1 where base's is not positive or either is not
// counted.
func ratios(rep BenchReport, backend, base string) map[string]map[int]row {
	out := map[string]map[int]row{}
	for k, c := range pairRatios(rep, backend, base) {
		if out[k.lib] == nil {
			out[k.lib] = map[int]row{}
		}
		r := medianRow(c.runs)
		if len(c.batches) > 0 {
			med := medianRow(c.batches)
			r.p50, r.acq = med.p50, med.acq
		}
		out[k.lib][k.w] = r
	}
	return out
}

// cellRatios are one peer's ratios to lockproof in one cell: a row per
// run (p50 and acq/s the median of the run's batches' ratios, where it has
// batches) and a row per pair of batches (p50 and acq/s only).
type cellRatios struct{ runs, batches []row }

// pairRatios returns the cellRatios of every library of backend but base.
func pairRatios(rep BenchReport, backend, base string) map[cellKey]*cellRatios {
	type runKey struct{ run, w int }
	bases := map[runKey]Measurement{}
	for _, m := range rep.Measurements {
		if m.Backend == backend && m.Lib == base {
			bases[runKey{m.Run, m.Waiters}] = m
		}
	}
	out := map[cellKey]*cellRatios{}
	for _, m := range rep.Measurements {
		b, ok := bases[runKey{m.Run, m.Waiters}]
		if !ok || m.Backend != backend || m.Lib == base {
			continue
		}
		k := cellKey{m.Lib, m.Waiters}
		if out[k] == nil {
			out[k] = &cellRatios{}
		}
		run := divide(rowOf(m), rowOf(b))
		var byBatch []row
		for i := range min(len(m.Batches), len(b.Batches)) {
			byBatch = append(byBatch, divide(batchRow(m.Batches[i]), batchRow(b.Batches[i])))
		}
		if len(byBatch) > 0 {
			med := medianRow(byBatch)
			run.p50, run.acq = med.p50, med.acq
		}
		out[k].runs = append(out[k].runs, run)
		out[k].batches = append(out[k].batches, byBatch...)
	}
	return out
}

// ratioWarnings flags the peers' p50 and acq/s ratios to lockproof that
// spread more than limit around their median across runs (each run's the
// median of its batches'): such a ratio is
// not settled by the runs made, however steady each library's own figures
// look.
func ratioWarnings(rep BenchReport, limit float64) []string {
	if rep.Runs < 2 {
		return nil
	}
	var warn []string
	for _, name := range rep.Backends {
		be, ok := backendNamed(name)
		if !ok {
			continue
		}
		for k, c := range pairRatios(rep, name, be.libs[0]) {
			warn = append(warn, spreadWarnings(c.runs, limit, func(metric string, spread float64, xs []float64) string {
				return fmt.Sprintf("noisy ratio: %s's %s to lockproof's on %s at %s spread %.0f%% across %d runs (%.2f to %.2f)",
					k.lib, metric, name, waitersName(k.w), 100*spread, len(xs), slices.Min(xs), slices.Max(xs))
			})...)
		}
	}
	sort.Strings(warn)
	return warn
}

// spreadWarnings returns, for p50 and acq/s, say's sentence when the
// positive values among rs spread more than limit around their median.
func spreadWarnings(rs []row, limit float64, say func(metric string, spread float64, xs []float64) string) []string {
	var warn []string
	for _, metric := range []struct {
		name string
		f    func(row) float64
	}{{"p50", func(r row) float64 { return r.p50 }}, {"acq/s", func(r row) float64 { return r.acq }}} {
		var xs []float64
		for _, r := range rs {
			if v := metric.f(r); v > 0 {
				xs = append(xs, v)
			}
		}
		if len(xs) < 2 {
			continue
		}
		if spread := (slices.Max(xs) - slices.Min(xs)) / median(xs); spread > limit {
			warn = append(warn, say(metric.name, spread, xs))
		}
	}
	return warn
}

// batchRow is a batch's figures as a row: p50 and acq/s, the rest -1.
func batchRow(b Batch) row {
	return row{p50: b.P50Ms, acq: b.AcqPerSec, p99: -1, cmds: -1, allocs: -1, wake: -1}
}

// divide returns r's figures over base's, each -1 where base's is not
// positive or r's is negative.
func divide(r, base row) row {
	for i, f := range r.fields() {
		if d := *base.fields()[i]; d > 0 && *f >= 0 {
			*f /= d
		} else {
			*f = -1
		}
	}
	return r
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// noiseWarnings flags cells whose runs spread more than limit around their
// median (p50 latency and throughput).
func noiseWarnings(rep BenchReport, limit float64) []string {
	if rep.Runs < 2 {
		return nil
	}
	type key struct {
		backend, lib string
		w            int
	}
	groups := map[key][]row{}
	for _, m := range rep.Measurements {
		k := key{m.Backend, m.Lib, m.Waiters}
		groups[k] = append(groups[k], rowOf(m))
	}
	var warn []string
	for k, rs := range groups {
		warn = append(warn, spreadWarnings(rs, limit, func(metric string, spread float64, xs []float64) string {
			return fmt.Sprintf("noisy: %s on %s %s at %s spread %.0f%% across %d runs",
				k.lib, k.backend, metric, waitersName(k.w), 100*spread, len(xs))
		})...)
	}
	sort.Strings(warn)
	return warn
}

// cutShort lists the contended runs -cell-time stopped before -n
// acquisitions: their figures rest on fewer samples.
func cutShort(rep BenchReport, f benchFlags) []string {
	var warn []string
	for _, m := range rep.Measurements {
		if m.Waiters > 0 && m.Acquisitions < f.n {
			warn = append(warn, fmt.Sprintf("cut short: %s on %s at W=%d made %d of %d acquisitions in run %d (-cell-time %v)",
				m.Lib, m.Backend, m.Waiters, m.Acquisitions, f.n, m.Run, f.cellTime))
		}
	}
	return warn
}

func waitersName(w int) string {
	if w == 0 {
		return "uncontended"
	}
	return fmt.Sprintf("W=%d", w)
}

// printBench prints a table per backend: a row per metric and contention
// level, a column per library, each peer with its ratio to lockproof.
// measuredBackend is the backend called name with the libraries rep
// measured on it: its own, then any other (bench -semaphores adds
// libSemaphore, -rwlocks the rwLibs), in the order of their first
// measurement.
func measuredBackend(rep BenchReport, name string) (benchBackend, bool) {
	be, ok := backendNamed(name)
	if !ok {
		return be, false
	}
	be.libs = slices.Clone(be.libs)
	for _, m := range rep.Measurements {
		if m.Backend == name && !slices.Contains(be.libs, m.Lib) {
			be.libs = append(be.libs, m.Lib)
		}
	}
	return be, true
}

func printBench(w io.Writer, rep BenchReport) {
	fmt.Fprintf(w, "medians of %d runs; Turns: every hand-off goes to a waiter\n", rep.Runs)
	for _, name := range rep.Backends {
		be, ok := measuredBackend(rep, name)
		if !ok {
			continue
		}
		fmt.Fprintf(w, "\n%s: %s\n", name, rep.About[name])
		printBackend(w, rep, be)
	}
	fmt.Fprintln(w, "\nratios are the median of the peer's per-run values over lockproof's (the libraries take turns")
	fmt.Fprintln(w, "batch by batch within a run); allocs include an embedded server's;")
	fmt.Fprintln(w, "cmds: Redis commands sent; reqs: etcd unary RPCs and stream messages sent, Consul HTTP requests,")
	fmt.Fprintln(w, "ZooKeeper requests (pings included);")
	fmt.Fprintln(w, "wakeups/handoff: per hand-off, watch events the etcd and ZooKeeper clients received, Consul blocking queries that returned")
	for _, warning := range rep.Warnings {
		fmt.Fprintln(w, "warning:", warning)
	}
}

func printBackend(w io.Writer, rep BenchReport, be benchBackend) {
	med, ws := medians(rep, be.name)
	rat := ratios(rep, be.name, be.libs[0])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "\t")
	for _, lib := range be.libs {
		fmt.Fprintf(tw, "%s\t", lib)
	}
	fmt.Fprintln(tw)
	for _, wt := range ws {
		for _, metric := range []struct {
			name    string
			f       func(row) float64
			handoff bool // a hand-off latency, labelled so
			skip    bool
		}{
			{"p50 ms", func(r row) float64 { return r.p50 }, true, false},
			{"p99 ms", func(r row) float64 { return r.p99 }, true, false},
			{"acq/s", func(r row) float64 { return r.acq }, false, wt == 0},
			{be.unit + "/acq", func(r row) float64 { return r.cmds }, false, false},
			{"wakeups/handoff", func(r row) float64 { return r.wake }, false, wt == 0 || med[be.libs[0]][wt].wake < 0},
			{"allocs/acq", func(r row) float64 { return r.allocs }, false, false},
		} {
			if metric.skip {
				continue
			}
			label := "uncontended " + metric.name
			switch {
			case wt > 0 && metric.handoff:
				label = fmt.Sprintf("W=%d handoff %s", wt, metric.name)
			case wt > 0:
				label = fmt.Sprintf("W=%d %s", wt, metric.name)
			}
			fmt.Fprintf(tw, "%s\t", label)
			for i, lib := range be.libs {
				v := metric.f(med[lib][wt])
				if r, ok := rat[lib][wt]; i > 0 && ok && v >= 0 && metric.f(r) >= 0 {
					fmt.Fprintf(tw, "%.4g (%s)\t", v, ratio(metric.f(r)))
				} else {
					fmt.Fprintf(tw, "%.4g\t", v)
				}
			}
			fmt.Fprintln(tw)
		}
	}
	_ = tw.Flush()
}

// ratio formats a ratio: whole numbers from 10, two decimals from 0.1,
// two significant digits below.
func ratio(r float64) string {
	switch {
	case r >= 10:
		return fmt.Sprintf("%.0f×", r)
	case r >= 0.1:
		return fmt.Sprintf("%.2f×", r)
	}
	return fmt.Sprintf("%.2g×", r)
}

// libColors color the libraries of a backend, lockproof's first.
var libColors = []string{"#2b7", "#c63", "#68c"}

// benchChart is one backend's SVG bar chart of acq/s.
type benchChart struct {
	Backend, About string
	Width          float64
	Bars           []benchBar
	Legend         []benchBar // Label and Color only
}

type benchBar struct {
	X, Y, W, H   float64
	Label, Color string
}

func chartOf(rep BenchReport, be benchBackend) benchChart {
	med, ws := medians(rep, be.name)
	c := benchChart{Backend: be.name, About: rep.About[be.name]}
	for i, lib := range be.libs {
		c.Legend = append(c.Legend, benchBar{Label: lib, Color: libColors[i%len(libColors)]})
	}
	maxAcq := 1.0
	for _, wt := range ws {
		for _, lib := range be.libs {
			maxAcq = max(maxAcq, med[lib][wt].acq)
		}
	}
	x := 40.0
	for _, wt := range ws {
		if wt == 0 {
			continue
		}
		for i, lib := range be.libs {
			v := med[lib][wt].acq
			h := 200 * v / maxAcq
			c.Bars = append(c.Bars, benchBar{X: x, Y: 230 - h, W: 22, H: h,
				Label: fmt.Sprintf("%s W=%d: %.0f acq/s", lib, wt, v), Color: libColors[i%len(libColors)]})
			x += 26
		}
		x += 20
	}
	c.Width = x + 20
	return c
}

// writeBenchHTML writes a page with an SVG bar chart of acq/s per
// contention level and library for each backend.
func writeBenchHTML(w io.Writer, rep BenchReport) error {
	var charts []benchChart
	for _, name := range rep.Backends {
		if be, ok := measuredBackend(rep, name); ok {
			charts = append(charts, chartOf(rep, be))
		}
	}
	page := template.Must(template.New("bench").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>lockproof bench</title>
<style>body{font:14px sans-serif;margin:2em}</style></head><body>
<h1>lockproof bench</h1><p>Medians of {{.Runs}} runs: acquisitions per second, every hand-off to a waiter.</p>
{{range .Charts}}<h2>{{.Backend}}</h2><p>{{.About}}</p>
<svg width="{{.Width}}" height="260" role="img" aria-label="{{.Backend}}: acquisitions per second">
<line x1="30" y1="230" x2="{{.Width}}" y2="230" stroke="#444"/>
{{range .Bars}}<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{.Color}}"><title>{{.Label}}</title></rect>
{{end}}</svg>
<p>{{range .Legend}}<span style="color:{{.Color}}">■</span> {{.Label}} {{end}}</p>
{{end}}{{range .Warnings}}<p>warning: {{.}}</p>{{end}}
</body></html>
`))
	return page.Execute(w, struct {
		Runs     int
		Charts   []benchChart
		Warnings []string
	}{rep.Runs, charts, rep.Warnings})
}
