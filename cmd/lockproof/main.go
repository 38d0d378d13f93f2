// Command lockproof proves locks right or wrong.
//
//	lockproof check [flags]            run every lock through the fault matrix
//	lockproof replay [flags] <seed>    re-run the failure a seed names
//	lockproof history [flags] <file>   check a recorded JSON history
//	lockproof bench [flags]            measure locks against their peers
//
// check runs the propertytest suite (propertytest.RunStandalone) on every
// cell of a matrix: each built-in lock under each fault scenario it is
// offered (crashes and pauses always; partitions, lost replies, failover,
// node stops where the backend has them), on embedded backends, or on the
// real servers given by flags. Each cell gets an even share of -budget as
// its own deadline, and at least 5 runs even past it (or exactly -runs
// runs). It shows its progress on stderr (a status line on a terminal,
// plain lines otherwise), prints a lock × property table (pass: checked by
// 5 runs or more; VIOLATED with the seed that replays it; expected: broken
// only under a fault the lock does not claim; too few runs (n): checked by
// fewer than 5 runs, never violated; - for availability not checked,
// with the reason in the legend), writes
// a self-contained HTML report (-html) with the timeline of every
// violation, and with -json prints the results as JSON instead of the
// table. -locks mutants (or mutant/<name>) adds the deliberately broken
// locks of package propertytest/mutants, to see the gate fail; -locks
// semaphores (or redis-semaphore, etcd-semaphore, consul-semaphore,
// zk-semaphore) adds the semaphores of 2 permits on the embedded backends,
// -locks rwlocks (or redis-rwmutex, etcd-rwmutex, consul-rwmutex, zk-rwmutex) the read-write locks,
// and -locks reentrant (or redislock-reentrant, …) the built-in locks with
// an owner per client whose holders re-enter (propertytest's
// Options.Reentrant), which the default matrix leaves out to stay within
// its budget. -clusters checks instead the cells on the lab's real
// replicated clusters (fakes/lab, propertytest/clusters): etcdlock on a
// 3-member etcd, zklock on a 3-server ZooKeeper and consullock on 3
// Consul servers, their leaders isolated, killed and paused, redislock
// through Redis Sentinel, its primary cut off and failed over (not
// claimed), redlock on 5 independent Redis nodes, a majority restarted one
// by one with their data and without (not claimed), and mysqllock on a
// 3-node Galera, one node's clock skewed (not claimed), one cluster at a
// time, started before its first cell and closed after its last, 5 runs a
// cell unless -runs or -budget. It needs root, the lab's tools and the servers, refused before
// any work naming what is missing, and re-runs itself in the lab's sandbox
// (a network namespace with no route out). An expected violation's saved
// history is read back as lockproof history reads it, and its verdict
// printed.
//
// For a user's replicated deployment, -redis-sentinel NAME@host:port,…
// runs redislock through go-redis's failover client; -zk, -consul and
// -mysql take comma-separated lists (client i on server i mod n); and
// -nemesis CMD strikes the real servers' nodes at the seeded fault points
// of each run, as `CMD <action> <node>`: kill/start (fault kind
// node-down), pause/resume (node-pause), partition/heal (partition),
// skew/unskew (clock-skew). Nodes are numbered from 0 in the order the
// cell's flag lists them; the command's environment holds
// LOCKPROOF_NEMESIS_TARGET (the lock) and LOCKPROOF_NEMESIS_NODES. Exit
// status 0 means done; another, or no exit within -nemesis-timeout, fails
// the run with the command's stderr; its stdout goes to the run's log.
// These faults are not claimed: what they break is reported as expected.
//
// Every seed check prints carries its cell in its top 16 bits: replay
// needs only the seed (and the real-server flags and -nemesis if check had them) to re-run that one run,
// minimize it again and print its history and timeline.
//
// history reads a history file (linearize.ReadFile), checks it against
// the model the file names and prints the verdict with a text timeline;
// -html writes the self-contained HTML timeline too. A file without a
// model (written before files named theirs) is checked against -model,
// and -model, -permits, -ttl or -tolerance given checks any file against
// the model they make. Models: lease (a lease lock; -ttl and -tolerance),
// lease-from-call (a lease that runs from its call), semaphore (-permits
// holders at once), rwlock (readers or one writer), fenced (a register
// whose writes carry fencing tokens), register, kv.
//
// bench measures lockproof's locks against their peers, in one run, on the
// backends -backends names (default all): on embedded miniredis or a real
// Redis (-redis), redislock against go-redsync/redsync and bsm/redislock;
// on an embedded one-member etcd (no fsync), etcdlock against
// client/v3/concurrency's Mutex, every worker with a client of its own (a
// Locker, or a Session and Mutex); on miniconsul (wall clock), consullock
// (a Locker per worker) against api.Lock (one per worker), on one client;
// on in-process minizk (wall clock) or a real ZooKeeper (-zk host:port,
// checked to grant a session before any work; the bench's nodes are deleted
// after), zklock against go-zookeeper's zk.Lock, every worker with a
// connection, and so a session, of its own. -semaphores adds, on every
// backend, lockproof's semaphore of one permit (column semaphore(1)), its
// ratio to the backend's mutex.
// It measures uncontended lock+unlock latency, and with -waiters
// contenders (default 4, 16 and 64) the hand-off latency (every hand-off
// to a waiter), acquisitions per second, requests per acquisition (Redis
// commands at a go-redis hook; etcd unary RPCs plus messages sent on
// streams, at a gRPC client interceptor; Consul HTTP requests at the
// client's RoundTripper; ZooKeeper requests, pings included, read off the
// wire at a dialer wrapper, peers.ZKCounter), wake-ups per hand-off (etcd
// and ZooKeeper: the watch events the workers' clients received; Consul:
// the blocking queries that returned), and allocations per acquisition. It
// prints a table per backend, medians over -runs with each peer's ratio to
// lockproof, warns when the runs spread, and writes -json and -html (an
// SVG chart per backend). `lockproof bench -runs 1 -n 40` took 71 s on two
// shared cores, most of it api.Lock's 5 s retry sleeps; -cell-time (default
// 30s) stops handing out acquisitions in a contended run after that long,
// so that the peers that wait seconds per hand-off cannot stretch a run.
//
// Exit status of check: 0 when no lock violated a property it claims, 1
// when one did, 2 on bad usage (flags, output paths: refused before any
// run), 3 on an error: a cell could not be checked (a backend did not
// start; its row gives the cause, such as the connection error) or the
// results could not be written. A gate never passes what it could not
// check.
// replay: 1 when the violation reproduced, 0 when it did not, 2 and 3 as
// check. history: 0 linearizable, 1 not linearizable, 2 bad usage
// or a malformed history, 3 unknown (the -timeout ran out). bench: 0, or 1
// if a measurement failed (a lock that let two holders in fails it), 2 on
// bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/linearize"
)

// Exit statuses.
const (
	exitOK      = 0
	exitIllegal = 1
	exitUsage   = 2
	exitUnknown = 3
)

func main() {
	redisfake.QuietClientLogs() // the lab's failovers and stopped servers are on purpose
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "history":
		return history(args[1:], stdout, stderr)
	case "bench":
		return bench(args[1:], stdout, stderr)
	case "check":
		return checkCmd(args[1:], stdout, stderr)
	case "replay":
		return replayCmd(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "lockproof: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: lockproof <command> [flags]

commands:
  check [flags]            run every lock through the fault matrix (-h for its flags)
  replay [flags] <seed>    re-run the failure a seed printed by check names
  history [flags] <file>   check a recorded JSON history (-h for its flags)
  bench [flags]            measure the locks against their peers (Redis, etcd, Consul, ZooKeeper)
`)
}

// historyFlags are history's options.
type historyFlags struct {
	model     string
	permits   int
	ttl       time.Duration
	tolerance time.Duration
	timeout   time.Duration
	html      string
	all       bool
}

// historyUsage is history's help: the command line, then the format.
const historyUsage = `lockproof history [flags] <file>   (- reads standard input)

The file is one JSON object: "version" 2, "model", the model to check
against, and "operations", an array of operations. A file without
"version" and "model" is checked against -model. Model flags given check
any file against the model they make.

  "model"    {"kind": "lease"|"lease-from-call"|"rwlock", "ttl": n, "tolerance": n},
             {"kind": "semaphore", "permits": n, "ttl": n, "tolerance": n},
             or {"kind": "fenced"|"register"|"kv"}; durations in nanoseconds

Each operation has exactly these members (any other is an error):

  {"version": 2, "model": {"kind": "lease", "ttl": 10000000000, "tolerance": 10000000},
   "operations": [
    {"id": 1, "client": 0, "call": 100, "return": 250,
     "input": {"lock": "L", "op": "acquire", "owner": 7},
     "output": {"ok": true, "token": 1}},
    {"id": 2, "client": 1, "call": 120, "return": 900, "unknown": true,
     "input": {"lock": "L", "op": "release", "owner": 9}}
  ]}

  "id"       integer, unique in the history
  "client"   integer >= 0: operations of one client do not overlap
  "call", "return"
             integers, nanoseconds on one clock, return >= call
  "input"    what was asked, by model:
               lease, lease-from-call, semaphore, rwlock
                         {"lock": name, "op": "acquire"|"release"|"renew", "owner": integer}
                         and for rwlock "shared": true on a read acquire
               fenced    {"op": "read"|"write"|"peek", "token": integer, "value": string}
               register  {"op": "read"|"write", "value": string}
               kv        {"op": "get"|"put"|"append", "key": string, "value": string}
  "output"   what came back (leave it out when "unknown" is true):
               lease, lease-from-call, semaphore, rwlock
                         {"ok": granted or succeeded, "token": the fencing token of a grant}
               fenced    {"ok": accepted, "value": string}
               register  {"value": string}
               kv        {"value": string}
  "unknown"  optional, true when the call's outcome is unknown (a timeout):
             it may have taken effect any time after its call, or never

A history that checks fine is summed up when it has more than ` + "%d" + ` operations
(-all prints every one). Exit status: 0 linearizable, 1 not, 2 bad usage or
a malformed history, 3 unknown (-timeout ran out).

flags:`

// shortHistory is the most operations history draws of a history that is
// not Illegal, unless -all.
const shortHistory = 50

// defaultTolerance is the lease model's -tolerance unless given: 10 ms, or
// a tenth of the TTL when that is less, so that any TTL works.
func defaultTolerance(ttl time.Duration) time.Duration { return min(10*time.Millisecond, ttl/10) }

func history(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lockproof history", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f historyFlags
	fs.StringVar(&f.model, "model", "lease", "lease, lease-from-call (a lease that runs from its call, as Redlock's quorum of copies), semaphore, rwlock, fenced, register or kv")
	fs.IntVar(&f.permits, "permits", 1, "semaphore model: how many leases may be held at once")
	fs.DurationVar(&f.ttl, "ttl", 10*time.Second, "lease model: the locks' TTL")
	fs.DurationVar(&f.tolerance, "tolerance", 0, "lease model: clock error allowed between the history and the server, less than -ttl (default: 10ms, or -ttl/10 when that is less)")
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "give up (verdict unknown) after this long")
	fs.StringVar(&f.html, "html", "", "also write the HTML timeline to this file")
	fs.BoolVar(&f.all, "all", false, fmt.Sprintf("draw every operation: of an illegal history not only the counterexample, of another not only a summary when it has more than %d", shortHistory))
	if code, ok := parseArgs(fs, args, fmt.Sprintf(historyUsage, shortHistory), 1, stderr); !ok {
		return code
	}
	if !flagGiven(fs, "tolerance") {
		f.tolerance = defaultTolerance(f.ttl)
	}
	bad := flagProblems{cmd: "lockproof history"}
	bad.need(f.ttl > 0, "ttl", f.ttl, "want a positive duration")
	bad.need(f.tolerance >= 0, "tolerance", f.tolerance, "want a duration ≥ 0")
	bad.need(f.ttl <= 0 || f.tolerance < f.ttl, "tolerance", f.tolerance, fmt.Sprintf("want less than -ttl %v", f.ttl))
	bad.need(f.timeout > 0, "timeout", f.timeout, "want a positive duration")
	bad.need(slices.Contains(linearize.ModelKinds, linearize.ModelKind(f.model)), "model", strconv.Quote(f.model), fmt.Sprintf("want one of %v", linearize.ModelKinds))
	bad.need(f.permits >= 1, "permits", f.permits, "want at least 1")
	bad.output("html", f.html)
	if bad.report(stderr) {
		return exitUsage
	}
	in, closeIn, err := open(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "lockproof history: %v\n", err)
		return exitUsage
	}
	defer closeIn()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	name := fs.Arg(0)
	if name == "-" {
		name = "standard input"
	}
	spec := linearize.Spec{Kind: linearize.ModelKind(f.model)}
	switch spec.Kind {
	case linearize.KindSemaphore:
		spec.Permits, spec.TTL, spec.Tolerance = f.permits, f.ttl, f.tolerance
	case linearize.KindLease, linearize.KindLeaseFromCall, linearize.KindRWLock:
		spec.TTL, spec.Tolerance = f.ttl, f.tolerance
	}
	read := linearize.ReadFile
	if flagGiven(fs, "model") || flagGiven(fs, "permits") || flagGiven(fs, "ttl") || flagGiven(fs, "tolerance") {
		read = linearize.ReadFileAs
	}
	file, err := read(in, spec)
	if err != nil {
		fmt.Fprintf(stderr, "lockproof history: %s: %s\n", name, strings.TrimPrefix(err.Error(), "linearize: "))
		return exitUsage
	}
	return checkFile(ctx, file, f, stdout, stderr)
}

func open(path string) (io.Reader, func(), error) {
	if path == "-" {
		return os.Stdin, func() {}, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return fh, func() { _ = fh.Close() }, nil
}

// checkFile checks and renders one history file.
func checkFile(ctx context.Context, file *linearize.File, f historyFlags, stdout, stderr io.Writer) int {
	res, err := file.Check(ctx, linearize.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "lockproof history: %s\n", strings.TrimPrefix(err.Error(), "linearize: "))
		return exitUsage
	}
	fmt.Fprintf(stdout, "checked against the %s\n", file.Spec())
	pic := linearize.Picture{All: f.all, Unit: time.Nanosecond}
	if res.Verdict != linearize.Illegal && !f.all && file.Len() > shortHistory {
		printSummary(stdout, file.Operations(), &res)
	} else if err := file.WriteText(stdout, &res, pic); err != nil {
		fmt.Fprintf(stderr, "lockproof history: %v\n", err)
		return exitUsage
	}
	if f.html != "" {
		if err := writeHTML(f.html, file, &res, pic); err != nil {
			fmt.Fprintf(stderr, "lockproof history: %v\n", err)
			return exitUsage
		}
		fmt.Fprintf(stdout, "timeline: %s\n", f.html)
	}
	switch res.Verdict {
	case linearize.Ok:
		return exitOK
	case linearize.Illegal:
		return exitIllegal
	}
	return exitUnknown
}

// printSummary sums up a long history that is not Illegal in two lines.
func printSummary(w io.Writer, h []linearize.Operation[any, any], res *linearize.Result) {
	clients, unknown := map[int]bool{}, 0
	from, to := h[0].Call, h[0].Return
	for i := range h {
		clients[h[i].ClientID] = true
		from, to = min(from, h[i].Call), max(to, h[i].Return)
		if h[i].Unknown {
			unknown++
		}
	}
	verdict := "linearizable"
	if res.Verdict != linearize.Ok {
		verdict = fmt.Sprintf("unknown: %v", res.Cause)
	}
	fmt.Fprintf(w, "%s — %s: %s of %s (%d with unknown outcome) in %s, time %v .. %v\n",
		res.Verdict, verdict, plural(len(h), "operation", "operations"), plural(len(clients), "client", "clients"),
		unknown, plural(len(res.Partitions), "partition", "partitions"), from, to)
	fmt.Fprintf(w, "(the timeline's %d lines are left out: -all prints them)\n", len(h))
}

// plural is "1 thing" or "n things".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func writeHTML(path string, file *linearize.File, res *linearize.Result, pic linearize.Picture) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := file.WriteHTML(fh, res, pic); err != nil {
		_ = fh.Close()
		return err
	}
	return fh.Close()
}

// parseArgs parses a command's flags, with usage as the first line of its
// help, and requires exactly nargs arguments after them. When it returns
// ok false the command exits with code: exitOK after -h, exitUsage after
// a bad flag or argument count (the reason and the help printed on
// stderr).
func parseArgs(fs *flag.FlagSet, args []string, usage string, nargs int, stderr io.Writer) (code int, ok bool) {
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: "+usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() != nargs {
		if fs.NArg() > nargs {
			fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(nargs))
		}
		fs.Usage()
		return exitUsage, false
	}
	return exitOK, true
}
