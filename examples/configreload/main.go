// Command configreload keeps a configuration of several parts that
// readers in several "processes" read again and again while reloaders
// rewrite it, one part at a time. Readers take the read lease of a
// distributed read-write lock, reloaders its write lease: readers share,
// and no reader ever sees a configuration half written. Then the same
// readers and reloads run with no lock.
//
// The store counts from the outside: the program exits with status 1 if,
// through the lock, a read saw parts of two versions, a reload began while
// a read or another reload was in progress, a reload was refused for a
// stale fencing token, or a reload was lost. It also reports how many
// reads were in progress at once (more than one: the readers shared).
// Without the lock reads are usually torn: that part is shown, not judged.
//
// It runs on an embedded backend: miniredis (-backend redis, the default),
// an embedded etcd (etcd), miniconsul (consul) or minizk (zk), in real time.
//
//	go run ./examples/configreload
//	go run ./examples/configreload -backend etcd -readers 12 -reloads 40
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run parses args, runs the readers and reloaders and returns the exit
// status: 0 when the lock kept every read whole, 1 when it did not or the
// run failed, 2 on bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("configreload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Backend, "backend", cfg.Backend, "the embedded backend: "+backends)
	fs.IntVar(&cfg.Procs, "procs", cfg.Procs, "simulated processes, each with its own client and read-write lock")
	fs.IntVar(&cfg.Readers, "readers", cfg.Readers, "readers, over all processes")
	fs.IntVar(&cfg.Writers, "reloaders", cfg.Writers, "reloaders, over all processes")
	fs.IntVar(&cfg.Reloads, "reloads", cfg.Reloads, "reloads in all")
	fs.IntVar(&cfg.Parts, "parts", cfg.Parts, "parts of the configuration (at least 2)")
	fs.DurationVar(&cfg.Step, "step", cfg.Step, "time between two parts of a read or a reload")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "configreload: unexpected arguments: %q\n", fs.Args())
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg, stdout)
	switch {
	case errors.Is(err, errConfig):
		fmt.Fprintf(stderr, "configreload: %v\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "configreload: %v\n", err)
		return 1
	case !rep.OK():
		return 1
	}
	return 0
}
