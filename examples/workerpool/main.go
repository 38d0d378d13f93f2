// Command workerpool runs a pool of workers, spread over several
// "processes" (each with its own backend client and its own semaphore),
// against an API that allows at most N calls at once. Every worker takes a
// permit of a distributed semaphore of N permits before each call and gives
// it back after, so the pool as a whole never exceeds the API's limit,
// however many workers and processes there are. Then the same jobs run with
// no semaphore.
//
// The API counts its calls in flight from the outside: the program exits
// with status 1 if the semaphore ever let more than N in at once, if a job
// was lost or run twice, or if two calls carried the same fencing token.
// Without the semaphore the limit is usually exceeded: that part is shown,
// not judged.
//
// It runs on an embedded backend: miniredis (-backend redis, the default),
// miniconsul (consul) or minizk (zk), in real time.
//
//	go run ./examples/workerpool
//	go run ./examples/workerpool -backend zk -permits 3 -workers 12 -jobs 200
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

// run parses args, runs the pool and returns the exit status: 0 when the
// semaphore kept the limit, 1 when it did not or the run failed, 2 on bad
// usage.
func run(args []string, stdout, stderr io.Writer) int {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("workerpool", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Backend, "backend", cfg.Backend, "the embedded backend: redis, consul or zk")
	fs.IntVar(&cfg.Permits, "permits", cfg.Permits, "calls the API allows at once: the semaphore's permits")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "workers of the pool, over all processes")
	fs.IntVar(&cfg.Procs, "procs", cfg.Procs, "simulated processes, each with its own client and semaphore")
	fs.IntVar(&cfg.Jobs, "jobs", cfg.Jobs, "jobs to run, each one call of the API")
	fs.DurationVar(&cfg.Work, "work", cfg.Work, "how long one call of the API takes")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "workerpool: unexpected arguments: %q\n", fs.Args())
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg, stdout)
	switch {
	case errors.Is(err, errConfig):
		fmt.Fprintf(stderr, "workerpool: %v\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "workerpool: %v\n", err)
		return 1
	case !rep.OK():
		return 1
	}
	return 0
}
