// Command contend shows what a distributed lock buys: workers spread over
// several "processes" (each with its own Redis client and its own
// redislock.Locker) take one lock in turn and increment a shared counter
// through a fencing-token guarded locks.Fence, then the same workload runs
// with no lock at all.
//
// With the lock no update may be lost and the fence may refuse nothing; the
// program exits with status 1 if either happens, so it doubles as a check.
// Without the lock, updates are usually lost: that part is shown, not judged.
//
// By default it runs on an embedded miniredis; -redis host:port uses a real
// server instead, under a key prefix of its own that is deleted at the end.
//
//	go run ./examples/contend
//	go run ./examples/contend -redis 127.0.0.1:6379 -workers 16 -rounds 50
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run parses args, runs the workload and returns the exit status: 0 when the
// locked run lost nothing, 1 when it did or the run failed, 2 on bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, timeout, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	// A signal ends the run early; the keys on a real server are still deleted.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rep, err := Run(ctx, cfg, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "contend: %v\n", err)
		return 1
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

// parseFlags turns the command line into a Config and the bound on the whole
// run; the errors are reported on stderr.
func parseFlags(args []string, stderr io.Writer) (Config, time.Duration, error) {
	cfg := DefaultConfig()
	timeout := 5 * time.Minute
	fs := flag.NewFlagSet("contend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "goroutines contending on the lock, over all processes")
	fs.IntVar(&cfg.Procs, "procs", cfg.Procs, "simulated processes, each with its own Redis client and Locker")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "acquisitions per worker")
	fs.DurationVar(&cfg.TTL, "ttl", cfg.TTL, "lease TTL")
	fs.StringVar(&cfg.RedisAddr, "redis", cfg.RedisAddr, "host:port of a real Redis server (default: embedded miniredis)")
	fs.DurationVar(&timeout, "timeout", timeout, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		return cfg, timeout, err
	}
	var err error
	switch {
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments: %q", fs.Args())
	case timeout <= 0:
		err = fmt.Errorf("-timeout %v must be positive", timeout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "contend: %v\n", err)
		fs.Usage()
		return cfg, timeout, err
	}
	return cfg, timeout, nil
}
