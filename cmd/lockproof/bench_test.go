package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks"
)

// TestBenchSmall runs the whole table at a tiny size: every library is
// measured, the peers get ratios, and the JSON and HTML files are written.
func TestBenchSmall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "b.json"), filepath.Join(dir, "b.html")
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-backends", "redis", "-runs", "1", "-n", "8", "-uncontended", "20", "-waiters", "2",
		"-json", jsonPath, "-html", htmlPath}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"uncontended p50 ms", "W=2 acq/s", "redsync", "bsm", "×)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	rep := readBenchJSON(t, jsonPath)
	if len(rep.Measurements) != 3*2 { // 3 libraries × (uncontended + W=2)
		t.Fatalf("%d measurements in the JSON, want 6", len(rep.Measurements))
	}
	for _, m := range rep.Measurements {
		if m.P50Ms <= 0 || (m.Waiters > 0 && m.AcqPerSec <= 0) {
			t.Errorf("empty measurement %+v", m)
		}
	}
	page, err := os.ReadFile(htmlPath)
	if err != nil || !strings.Contains(string(page), "<svg") {
		t.Fatalf("HTML chart not written (%v)", err)
	}
}

// TestBenchEtcdConsul runs the etcd and Consul tables at a tiny size: the
// rows are there, the peers get ratios, and the counters are plausible: at
// least one request per acquisition, and a wake-up count per hand-off
// (≥ 0) under contention. No timing is asserted.
func TestBenchEtcdConsul(t *testing.T) {
	t.Parallel()
	jsonPath := filepath.Join(t.TempDir(), "b.json")
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-backends", "etcd,consul", "-runs", "1", "-n", "3", "-uncontended", "3",
		"-waiters", "2", "-json", jsonPath}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"etcd: etcd (embedded", "consul: miniconsul", "concurrency", "api.Lock",
		"uncontended reqs/acq", "W=2 handoff p99 ms", "W=2 wakeups/handoff", "W=2 reqs/acq", "×)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "redsync") {
		t.Errorf("-backends etcd,consul measured Redis:\n%s", out.String())
	}
	rep := readBenchJSON(t, jsonPath)
	if len(rep.Measurements) != 2*2*2 { // 2 backends × 2 libraries × (uncontended + W=2)
		t.Fatalf("%d measurements in the JSON, want 8", len(rep.Measurements))
	}
	for _, m := range rep.Measurements {
		if m.CmdsPerAcq < 1 || m.P50Ms <= 0 || (m.Waiters > 0 && m.AcqPerSec <= 0) {
			t.Errorf("implausible measurement %+v", m)
		}
		wantWake := m.Waiters > 0
		if got := m.WakeupsPerHandoff != nil; got != wantWake {
			t.Errorf("%s %s W=%d: wake-ups counted %v, want %v", m.Backend, m.Lib, m.Waiters, got, wantWake)
		} else if got && *m.WakeupsPerHandoff < 0 {
			t.Errorf("%s %s: %v wake-ups per hand-off", m.Backend, m.Lib, *m.WakeupsPerHandoff)
		}
	}
}

// TestBenchRWLocks: -rwlocks adds the writers of lockproof's read-write
// lock where a backend has one, and on etcd those of the recipe's
// RWMutex, each with a ratio to the mutex. No timing is asserted.
func TestBenchRWLocks(t *testing.T) {
	t.Parallel()
	jsonPath := filepath.Join(t.TempDir(), "b.json")
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-backends", "redis,etcd,consul,zk", "-rwlocks", "-runs", "1", "-n", "3", "-uncontended", "3",
		"-waiters", "2", "-json", jsonPath}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	rep := readBenchJSON(t, jsonPath)
	got := map[string]int{}
	for _, m := range rep.Measurements {
		got[m.Backend+" "+m.Lib]++
		if m.P50Ms <= 0 || (m.Waiters > 0 && m.AcqPerSec <= 0) {
			t.Errorf("empty measurement %+v", m)
		}
	}
	for _, k := range []string{"redis " + libRWWriter, "etcd " + libRWWriter, "etcd " + libRecipeRWWriter, "consul " + libRWWriter, "zk " + libRWWriter} {
		if got[k] != 2 { // uncontended + W=2
			t.Errorf("%d measurements of %s, want 2", got[k], k)
		}
	}
	for _, lib := range []string{libRWWriter, libRecipeRWWriter} {
		if !strings.Contains(out.String(), lib) {
			t.Errorf("table lacks %q:\n%s", lib, out.String())
		}
	}
	if slices.Contains(benchBackends[1].libs, libRWWriter) {
		t.Error("-rwlocks changed the default backends' libraries")
	}
}

// TestBenchSemaphores: -semaphores adds lockproof's semaphore of one
// permit to every backend measured, with a ratio to the backend's mutex.
// No timing is asserted.
func TestBenchSemaphores(t *testing.T) {
	t.Parallel()
	jsonPath := filepath.Join(t.TempDir(), "b.json")
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-backends", "redis,consul,zk", "-semaphores", "-runs", "1", "-n", "3", "-uncontended", "3",
		"-waiters", "2", "-json", jsonPath}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	rep := readBenchJSON(t, jsonPath)
	got := map[string]int{}
	for _, m := range rep.Measurements {
		if m.Lib == libSemaphore {
			got[m.Backend]++
			if m.P50Ms <= 0 || (m.Waiters > 0 && m.AcqPerSec <= 0) {
				t.Errorf("empty measurement %+v", m)
			}
		}
	}
	for _, be := range []string{"redis", "consul", "zk"} {
		if got[be] != 2 { // uncontended + W=2
			t.Errorf("%d measurements of the semaphore on %s, want 2", got[be], be)
		}
	}
	if !strings.Contains(out.String(), libSemaphore) {
		t.Errorf("table lacks %q:\n%s", libSemaphore, out.String())
	}
	if benchBackends[0].libs[len(benchBackends[0].libs)-1] == libSemaphore {
		t.Error("-semaphores changed the default backends' libraries")
	}
}

// TestBenchZK runs the ZooKeeper table at a tiny size on minizk, then on
// a server given by -zk (minizk again, standing for a real one): the rows
// are there, zk.Lock gets ratios, requests and watch events are counted
// under contention, and a -zk server is left without the bench's nodes.
func TestBenchZK(t *testing.T) {
	t.Parallel()
	z := zkfake.New(t, zkfake.ForceMinizk())
	for _, extra := range [][]string{nil, {"-zk", z.Addr()}} {
		jsonPath := filepath.Join(t.TempDir(), "b.json")
		var out, errOut bytes.Buffer
		args := append([]string{"bench", "-backends", "zk", "-runs", "1", "-n", "3", "-uncontended", "3",
			"-waiters", "2", "-json", jsonPath}, extra...)
		if code := run(args, &out, &errOut); code != exitOK {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out.String(), errOut.String())
		}
		about := "zk: minizk (in-process"
		if extra != nil {
			about = "zk: ZooKeeper at " + z.Addr()
		}
		for _, want := range []string{about, "zk.Lock", "uncontended reqs/acq", "W=2 handoff p50 ms",
			"W=2 wakeups/handoff", "W=2 reqs/acq", "×)"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: table lacks %q:\n%s", args, want, out.String())
			}
		}
		rep := readBenchJSON(t, jsonPath)
		if len(rep.Measurements) != 2*2 { // 2 libraries × (uncontended + W=2)
			t.Fatalf("%d measurements in the JSON, want 4", len(rep.Measurements))
		}
		for _, m := range rep.Measurements {
			// Every acquisition creates a node and deletes it.
			if m.Backend != "zk" || m.CmdsPerAcq < 2 || m.P50Ms <= 0 || (m.Waiters > 0 && m.AcqPerSec <= 0) {
				t.Errorf("implausible measurement %+v", m)
			}
			if got := m.WakeupsPerHandoff != nil; got != (m.Waiters > 0) {
				t.Errorf("%s W=%d: watch events counted %v", m.Lib, m.Waiters, got)
			}
			// -uncontended 3 makes 3 batches of one cycle (-batches 4 at
			// most); -n 3 at W=2 one batch, so that every worker queues.
			sum := 0
			for _, b := range m.Batches {
				sum += b.Acquisitions
			}
			if want := map[int]int{0: 3, 2: 1}[m.Waiters]; len(m.Batches) != want || sum != m.Acquisitions {
				t.Errorf("%s W=%d: batches %+v for %d acquisitions, want %d batches", m.Lib, m.Waiters, m.Batches, m.Acquisitions, want)
			}
		}
	}
	kids, err := z.Minizk().Children("/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		if k != "zookeeper" {
			t.Errorf("-zk server left with /%s", k)
		}
	}
}

// An unreachable -zk server is refused before any work, with the cause.
func TestBenchZKUnreachable(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-backends", "zk", "-zk", "127.0.0.1:1"}, &out, &errOut)
	if code != exitIllegal || !strings.Contains(errOut.String(), "-zk 127.0.0.1:1") || strings.Contains(errOut.String(), "run 1/") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

// readBenchJSON reads the report bench wrote with -json.
func readBenchJSON(t *testing.T, path string) BenchReport {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep BenchReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestBenchBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "-waiters", "1"},
		{"bench", "-waiters", "x"},
		{"bench", "-runs", "0"},
		{"bench", "-n", "0"},
		{"bench", "-nope"},
		{"bench", "-backends", "redis,zookeeper"},
		{"bench", "-cell-time", "-1s"},
		{"bench", "-backends", "zk", "-zk", "localhost"},
		{"bench", "-backends", "zk", "-zk", ":2181"},
		{"bench", "-backends", "zk", "-zk", "localhost:0"},
		{"bench", "-backends", "zk", "-zk", "localhost:65536"},
		{"bench", "-backends", "zk", "-zk", "localhost:zk"},
		{"bench", "-backends", "redis", "-zk", "localhost:2181"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

func TestNoiseWarnings(t *testing.T) {
	rep := BenchReport{Runs: 3, Measurements: []Measurement{
		{Backend: "etcd", Lib: "lockproof", Run: 1, P50Ms: 1, AcqPerSec: 100},
		{Backend: "etcd", Lib: "lockproof", Run: 2, P50Ms: 1.1, AcqPerSec: 100},
		{Backend: "etcd", Lib: "lockproof", Run: 3, P50Ms: 2, AcqPerSec: 101},
	}}
	warn := noiseWarnings(rep, 0.25)
	if len(warn) != 1 || !strings.Contains(warn[0], "lockproof on etcd p50 at uncontended") {
		t.Fatalf("warnings %q, want one on lockproof's p50", warn)
	}
	short := cutShort(BenchReport{Measurements: []Measurement{
		{Backend: "consul", Lib: "api.Lock", Run: 1, Waiters: 64, Acquisitions: 12},
		{Backend: "consul", Lib: "lockproof", Run: 1, Waiters: 64, Acquisitions: 40},
		{Backend: "consul", Lib: "lockproof", Run: 1, Acquisitions: 10},
	}}, benchFlags{n: 40, cellTime: time.Second})
	if len(short) != 1 || !strings.Contains(short[0], "api.Lock on consul at W=64 made 12 of 40") {
		t.Fatalf("cut-short warnings %q, want one on api.Lock", short)
	}
	if got := median([]float64{3, 1, 2, 10}); got != 2.5 {
		t.Fatalf("median = %v", got)
	}
}

// BenchmarkBench measures what `lockproof bench` prints, through the same
// functions, as go test benchmarks: one sub-benchmark per backend, library
// and contention level, each on a fresh server, b.N acquisitions. Metrics:
// p50-ms and p99-ms (cycle latency uncontended, hand-off latency under
// contention), acq/s, reqs/acq (Redis commands, etcd RPCs and stream
// messages, Consul HTTP requests, ZooKeeper requests), wakeups/handoff (etcd
// and ZooKeeper watch events, Consul blocking queries returned) and
// allocs/acq. Run the table, for example (api.Lock's 5 s retry sleeps make
// Consul's contended rows slow):
//
//	go test -run '^$' -bench 'Bench/(etcd|consul)' -benchtime 40x -count 3 -timeout 30m ./cmd/lockproof/
//	go test -run '^$' -bench 'Bench/zk' -benchtime 400x -count 3 ./cmd/lockproof/
func BenchmarkBench(b *testing.B) {
	for _, be := range benchBackends {
		b.Run(be.name, func(b *testing.B) {
			for _, lib := range be.libs {
				for _, w := range []int{0, 4, 16, 64} {
					b.Run(fmt.Sprintf("%s/%s", lib, waitersName(w)), func(b *testing.B) {
						benchmarkCell(b, be, lib, w)
					})
				}
			}
		})
	}
}

func benchmarkCell(b *testing.B, be benchBackend, lib string, w int) {
	f := benchFlags{n: b.N, uncontended: b.N, hold: 100 * time.Microsecond}
	srv, err := be.start(f)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := srv.close(); err != nil {
			b.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	name := "lockproof-bench-" + locks.NewOwner()[:8]
	b.ResetTimer()
	var m Measurement
	m, err = benchOne(ctx, f, srv, lib, name, w)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(m.P50Ms, "p50-ms")
	b.ReportMetric(m.P99Ms, "p99-ms")
	if w > 0 {
		b.ReportMetric(m.AcqPerSec, "acq/s")
	}
	b.ReportMetric(m.CmdsPerAcq, "reqs/acq")
	if m.WakeupsPerHandoff != nil {
		b.ReportMetric(*m.WakeupsPerHandoff, "wakeups/handoff")
	}
	b.ReportMetric(m.AllocsPerAcq, "allocs/acq")
}

// TestRatiosPairBatches: a peer's p50 and acq/s ratios are the median of
// its batches' ratios to lockproof's batches of the same number, so a load
// that halves both libraries' throughput in one run leaves the ratio
// alone, where the ratio of each library's medians taken apart would not;
// the other figures pair runs. A ratio that spreads across runs (each
// run's the median of its batches') is flagged.
func TestRatiosPairBatches(t *testing.T) {
	m := func(lib string, run int, acq ...float64) Measurement {
		out := Measurement{Backend: "zk", Lib: lib, Run: run, Waiters: 16, CmdsPerAcq: 5 * float64(run)}
		for _, a := range acq {
			out.Batches = append(out.Batches, Batch{Acquisitions: 10, P50Ms: 1000 / a, AcqPerSec: a})
			out.AcqPerSec += a / float64(len(acq))
		}
		if lib == "zk.Lock" {
			out.CmdsPerAcq *= 2
		}
		return out
	}
	rep := BenchReport{Runs: 3, Backends: []string{"zk"}, Measurements: []Measurement{
		// Lockproof's run 1 was loaded; zk.Lock's run 3 too: each batch
		// of zk.Lock is 1.5× lockproof's batch next to it, but one.
		m("lockproof", 1, 500, 600), m("zk.Lock", 1, 750, 900),
		m("lockproof", 2, 1000, 1000), m("zk.Lock", 2, 1500, 1500),
		m("lockproof", 3, 400, 1000), m("zk.Lock", 3, 600, 9000),
	}}
	got := ratios(rep, "zk", "lockproof")["zk.Lock"][16]
	if got.acq != 1.5 || math.Abs(got.p50-1/1.5) > 1e-9 {
		t.Errorf("batch-paired ratios acq %v p50 %v, want 1.5 and 0.667", got.acq, got.p50)
	}
	if got.cmds != 2 {
		t.Errorf("run-paired reqs ratio %v, want 2", got.cmds)
	}
	if got.wake != -1 {
		t.Errorf("wake-ups not counted, yet ratio %v", got.wake)
	}
	med, _ := medians(rep, "zk")
	if apart := med["zk.Lock"][16].acq / med["lockproof"][16].acq; apart == 1.5 {
		t.Errorf("the medians taken apart agree (%v): the case shows nothing", apart)
	}
	// Run 3's ratio (the median of its batches', 5.25) is far from the
	// others' (1.5): the ratio is flagged as noisy, p50's and acq/s's.
	warn := ratioWarnings(rep, 0.25)
	if len(warn) != 2 || !strings.Contains(warn[0], "zk.Lock's acq/s to lockproof's on zk at W=16 spread 250%") ||
		!strings.Contains(warn[1], "zk.Lock's p50") {
		t.Errorf("ratio warnings %q, want acq/s's and p50's", warn)
	}
	steady := slices.Clone(rep.Measurements)
	steady[5] = m("zk.Lock", 3, 600, 1500)
	if warn := ratioWarnings(BenchReport{Runs: 3, Backends: rep.Backends, Measurements: steady}, 0.25); len(warn) != 0 {
		t.Errorf("steady ratios flagged: %q", warn)
	}
	// Without batches (a report from before them), runs pair.
	for i := range rep.Measurements {
		rep.Measurements[i].Batches = nil
	}
	if got := ratios(rep, "zk", "lockproof")["zk.Lock"][16].acq; got != 1.5 {
		t.Errorf("run-paired acq ratio %v, want 1.5", got)
	}
}
