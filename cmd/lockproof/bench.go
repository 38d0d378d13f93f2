package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html/template"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/lockbench"
	"github.com/lockproof/lockproof/locks/lockbench/peers"
	"github.com/lockproof/lockproof/locks/redislock"
)

// benchFlags are bench's options.
type benchFlags struct {
	waiters     []int
	n           int
	uncontended int
	runs        int
	hold        time.Duration
	redis       string
	json, html  string
	noisy       float64
}

// benchLib is one lock library measured on Redis.
type benchLib struct {
	name    string
	workers func(c redis.UniversalClient, name string, n int) ([]lockbench.Worker, error)
}

const benchTTL = 10 * time.Second

var benchLibs = []benchLib{
	{"lockproof", func(c redis.UniversalClient, name string, n int) ([]lockbench.Worker, error) {
		l, err := redislock.New(c, name, locks.WithTTL(benchTTL))
		if err != nil {
			return nil, err
		}
		return lockbench.Shared(l, n), nil
	}},
	{"redsync", func(c redis.UniversalClient, name string, n int) ([]lockbench.Worker, error) {
		return peers.Redsync(c, name, benchTTL, n), nil
	}},
	{"bsm", func(c redis.UniversalClient, name string, n int) ([]lockbench.Worker, error) {
		return peers.BSM(c, name, benchTTL, n), nil
	}},
}

// Measurement is one library's numbers in one run.
type Measurement struct {
	Lib          string  `json:"lib"`
	Run          int     `json:"run"`
	Waiters      int     `json:"waiters"` // 0: uncontended
	P50Ms        float64 `json:"p50_ms"`  // cycle latency, or hand-off
	P99Ms        float64 `json:"p99_ms"`
	AcqPerSec    float64 `json:"acq_per_sec,omitempty"`
	CmdsPerAcq   float64 `json:"cmds_per_acq"`
	AllocsPerAcq float64 `json:"allocs_per_acq"`
	SelfHandoff  float64 `json:"self_handoff_pct,omitempty"`
}

// BenchReport is what bench writes with -json.
type BenchReport struct {
	Backend      string        `json:"backend"`
	Runs         int           `json:"runs"`
	Measurements []Measurement `json:"measurements"`
	Warnings     []string      `json:"warnings,omitempty"`
}

func bench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lockproof bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f benchFlags
	waiters := fs.String("waiters", "4,16,64", "contenders per run, comma-separated")
	fs.IntVar(&f.n, "n", 400, "acquisitions per contended run")
	fs.IntVar(&f.uncontended, "uncontended", 1000, "lock+unlock cycles per uncontended run")
	fs.IntVar(&f.runs, "runs", 3, "runs of the whole table; medians are reported")
	fs.DurationVar(&f.hold, "hold", 100*time.Microsecond, "how long each holder keeps the lock")
	fs.StringVar(&f.redis, "redis", "", "a real Redis host:port instead of embedded miniredis")
	fs.StringVar(&f.json, "json", "", "write the measurements as JSON to this file")
	fs.StringVar(&f.html, "html", "", "write an HTML page with an SVG chart to this file")
	fs.Float64Var(&f.noisy, "noisy", 0.25, "warn when a median's runs spread more than this fraction")
	if code, ok := parseArgs(fs, args, "lockproof bench [flags]", 0, stderr); !ok {
		return code
	}
	var err error
	if f.waiters, err = parseInts(*waiters); err != nil || f.n < 1 || f.uncontended < 1 || f.runs < 1 || f.hold < 0 {
		fmt.Fprintf(stderr, "lockproof bench: bad flags (waiters %q: %v)\n", *waiters, err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
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
			return nil, fmt.Errorf("%q: want integers ≥ 2", part)
		}
		out = append(out, n)
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

// cmdCounter counts the commands a go-redis client sends, a pipeline
// counting each command in it.
type cmdCounter struct{ n atomic.Int64 }

func (h *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// runBench measures every library f.runs times, alternating libraries
// within a run so that outside load spreads over all of them.
func runBench(ctx context.Context, f benchFlags, progress io.Writer) (BenchReport, error) {
	rep := BenchReport{Backend: "miniredis (embedded)", Runs: f.runs}
	if f.redis != "" {
		rep.Backend = "Redis at " + f.redis
	}
	for run := 1; run <= f.runs; run++ {
		for _, lib := range benchLibs {
			fmt.Fprintf(progress, "run %d/%d: %s\n", run, f.runs, lib.name)
			ms, err := benchLibrary(ctx, f, lib, run)
			if err != nil {
				return rep, fmt.Errorf("%s: %w", lib.name, err)
			}
			rep.Measurements = append(rep.Measurements, ms...)
		}
	}
	rep.Warnings = noiseWarnings(rep, f.noisy)
	return rep, nil
}

// benchLibrary measures one library on a fresh server: uncontended, then
// each contention level in turns mode.
func benchLibrary(ctx context.Context, f benchFlags, lib benchLib, run int) ([]Measurement, error) {
	addr := f.redis
	if addr == "" {
		srv, err := miniredis.Run()
		if err != nil {
			return nil, err
		}
		defer srv.Close()
		addr = srv.Addr()
	}
	counter := &cmdCounter{}
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	client.AddHook(counter)
	name := fmt.Sprintf("lockproof-bench-%s-%d-%s", lib.name, run, locks.NewOwner()[:8])

	var out []Measurement
	ws, err := lib.workers(client, name+"-u", 1)
	if err != nil {
		return nil, err
	}
	if _, err := lockbench.Uncontended(ctx, ws[0], 10); err != nil { // warm-up
		return nil, err
	}
	cmds, allocs := counter.n.Load(), mallocs()
	lat, err := lockbench.Uncontended(ctx, ws[0], f.uncontended)
	if err != nil {
		return nil, err
	}
	out = append(out, Measurement{
		Lib: lib.name, Run: run,
		P50Ms:        ms(lockbench.Percentile(lat, 50)),
		P99Ms:        ms(lockbench.Percentile(lat, 99)),
		CmdsPerAcq:   float64(counter.n.Load()-cmds) / float64(f.uncontended),
		AllocsPerAcq: float64(mallocs()-allocs) / float64(f.uncontended),
	})
	for _, w := range f.waiters {
		ws, err := lib.workers(client, fmt.Sprintf("%s-w%d", name, w), w)
		if err != nil {
			return nil, err
		}
		cmds, allocs := counter.n.Load(), mallocs()
		res, err := lockbench.Contend(ctx, ws, lockbench.Contention{Acquisitions: f.n, Hold: f.hold, Turns: true})
		if err != nil {
			return nil, err
		}
		out = append(out, Measurement{
			Lib: lib.name, Run: run, Waiters: w,
			P50Ms:        ms(lockbench.Percentile(res.Handoffs, 50)),
			P99Ms:        ms(lockbench.Percentile(res.Handoffs, 99)),
			AcqPerSec:    res.AcqPerSec(),
			CmdsPerAcq:   float64(counter.n.Load()-cmds) / float64(f.n),
			AllocsPerAcq: float64(mallocs()-allocs) / float64(f.n),
			SelfHandoff:  res.SelfHandoffPercent(),
		})
	}
	return out, nil
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// row is the medians of one (library, waiters) cell.
type row struct{ p50, p99, acq, cmds, allocs float64 }

func medians(rep BenchReport) (map[string]map[int]row, []int) {
	type key struct {
		lib string
		w   int
	}
	vals := map[key][]Measurement{}
	seen := map[int]bool{}
	for _, m := range rep.Measurements {
		vals[key{m.Lib, m.Waiters}] = append(vals[key{m.Lib, m.Waiters}], m)
		seen[m.Waiters] = true
	}
	out := map[string]map[int]row{}
	for k, ms := range vals {
		pick := func(f func(Measurement) float64) float64 {
			xs := make([]float64, len(ms))
			for i, m := range ms {
				xs[i] = f(m)
			}
			return median(xs)
		}
		if out[k.lib] == nil {
			out[k.lib] = map[int]row{}
		}
		out[k.lib][k.w] = row{
			p50:    pick(func(m Measurement) float64 { return m.P50Ms }),
			p99:    pick(func(m Measurement) float64 { return m.P99Ms }),
			acq:    pick(func(m Measurement) float64 { return m.AcqPerSec }),
			cmds:   pick(func(m Measurement) float64 { return m.CmdsPerAcq }),
			allocs: pick(func(m Measurement) float64 { return m.AllocsPerAcq }),
		}
	}
	ws := make([]int, 0, len(seen))
	for w := range seen {
		ws = append(ws, w)
	}
	sort.Ints(ws)
	return out, ws
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
		lib string
		w   int
	}
	groups := map[key][]Measurement{}
	for _, m := range rep.Measurements {
		groups[key{m.Lib, m.Waiters}] = append(groups[key{m.Lib, m.Waiters}], m)
	}
	var warn []string
	for k, ms := range groups {
		for _, metric := range []struct {
			name string
			f    func(Measurement) float64
		}{{"p50", func(m Measurement) float64 { return m.P50Ms }}, {"acq/s", func(m Measurement) float64 { return m.AcqPerSec }}} {
			xs := make([]float64, len(ms))
			for i, m := range ms {
				xs[i] = metric.f(m)
			}
			med := median(xs)
			if med <= 0 {
				continue
			}
			spread := (slices.Max(xs) - slices.Min(xs)) / med
			if spread > limit {
				warn = append(warn, fmt.Sprintf("noisy: %s %s at %s spread %.0f%% across %d runs",
					k.lib, metric.name, waitersName(k.w), 100*spread, len(xs)))
			}
		}
	}
	sort.Strings(warn)
	return warn
}

func waitersName(w int) string {
	if w == 0 {
		return "uncontended"
	}
	return fmt.Sprintf("W=%d", w)
}

// printBench prints one table: a row per metric and contention level, a
// column per library, each peer with its ratio to lockproof.
func printBench(w io.Writer, rep BenchReport) {
	med, ws := medians(rep)
	fmt.Fprintf(w, "%s, medians of %d runs; Turns: every hand-off goes to a waiter\n", rep.Backend, rep.Runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "\t")
	for _, lib := range benchLibs {
		fmt.Fprintf(tw, "%s\t", lib.name)
	}
	fmt.Fprintln(tw)
	for _, wt := range ws {
		for _, metric := range []struct {
			name string
			f    func(row) float64
			skip bool
		}{
			{"p50 ms", func(r row) float64 { return r.p50 }, false},
			{"p99 ms", func(r row) float64 { return r.p99 }, false},
			{"acq/s", func(r row) float64 { return r.acq }, wt == 0},
			{"cmds/acq", func(r row) float64 { return r.cmds }, false},
			{"allocs/acq", func(r row) float64 { return r.allocs }, false},
		} {
			if metric.skip {
				continue
			}
			label := "uncontended " + metric.name
			if wt > 0 {
				label = fmt.Sprintf("W=%d handoff %s", wt, metric.name)
				if metric.name == "acq/s" || metric.name == "cmds/acq" || metric.name == "allocs/acq" {
					label = fmt.Sprintf("W=%d %s", wt, metric.name)
				}
			}
			fmt.Fprintf(tw, "%s\t", label)
			base := metric.f(med["lockproof"][wt])
			for _, lib := range benchLibs {
				v := metric.f(med[lib.name][wt])
				if lib.name == "lockproof" || base == 0 {
					fmt.Fprintf(tw, "%.4g\t", v)
				} else {
					fmt.Fprintf(tw, "%.4g (%s)\t", v, ratio(v/base))
				}
			}
			fmt.Fprintln(tw)
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "ratios are the peer's value over lockproof's; allocs include an embedded server's")
	for _, warning := range rep.Warnings {
		fmt.Fprintln(w, "warning:", warning)
	}
}

// ratio formats a ratio: two decimals below 10, whole numbers above.
func ratio(r float64) string {
	if r >= 10 {
		return fmt.Sprintf("%.0f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

// writeBenchHTML writes a page with one SVG bar chart of acq/s per
// contention level and library.
func writeBenchHTML(w io.Writer, rep BenchReport) error {
	med, ws := medians(rep)
	type bar struct {
		X, Y, W, H float64
		Label      string
		Color      string
	}
	colors := map[string]string{"lockproof": "#2b7", "redsync": "#c63", "bsm": "#68c"}
	var bars []bar
	maxAcq := 1.0
	for _, wt := range ws {
		for _, lib := range benchLibs {
			maxAcq = max(maxAcq, med[lib.name][wt].acq)
		}
	}
	x := 40.0
	for _, wt := range ws {
		if wt == 0 {
			continue
		}
		for _, lib := range benchLibs {
			v := med[lib.name][wt].acq
			h := 200 * v / maxAcq
			bars = append(bars, bar{X: x, Y: 230 - h, W: 22, H: h,
				Label: fmt.Sprintf("%s W=%d: %.0f acq/s", lib.name, wt, v), Color: colors[lib.name]})
			x += 26
		}
		x += 20
	}
	page := template.Must(template.New("bench").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>lockproof bench</title>
<style>body{font:14px sans-serif;margin:2em}</style></head><body>
<h1>lockproof bench</h1><p>{{.Backend}}, medians of {{.Runs}} runs: acquisitions per second, every hand-off to a waiter.</p>
<svg width="{{.Width}}" height="260" role="img" aria-label="acquisitions per second">
<line x1="30" y1="230" x2="{{.Width}}" y2="230" stroke="#444"/>
{{range .Bars}}<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{.Color}}"><title>{{.Label}}</title></rect>
{{end}}</svg>
<p><span style="color:#2b7">■</span> lockproof <span style="color:#c63">■</span> redsync <span style="color:#68c">■</span> bsm</p>
{{range .Warnings}}<p>warning: {{.}}</p>{{end}}
</body></html>
`))
	return page.Execute(w, struct {
		Backend  string
		Runs     int
		Width    float64
		Bars     []bar
		Warnings []string
	}{rep.Backend, rep.Runs, x + 20, bars, rep.Warnings})
}
