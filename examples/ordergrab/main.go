// Command ordergrab replays the seeds' order grab: drivers spread over
// several service instances try to grab the same order at once, each
// checking that it is still open and then writing its own name.
//
// Three ways are compared on one embedded Redis:
//
//   - none: no lock; every driver that saw the order open believes it won.
//   - local: a sync.Mutex per instance; drivers of one instance take turns,
//     but the instances still race each other.
//   - redislock: one distributed lock per order; exactly one driver wins.
//
// The program exits with status 1 unless the distributed lock let exactly
// one driver win, so it doubles as a check.
//
//	go run ./examples/ordergrab
//	go run ./examples/ordergrab -instances 4 -drivers 8
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ordergrab", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := Config{}
	fs.IntVar(&cfg.Instances, "instances", 3, "service instances, each with its own Redis client")
	fs.IntVar(&cfg.Drivers, "drivers", 4, "drivers per instance, all grabbing at once")
	fs.DurationVar(&cfg.Work, "work", 5*time.Millisecond, "time between seeing the order open and taking it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "ordergrab: %v\n", err)
		return 1
	}
	if rep.Winners[ModeRedisLock] != 1 {
		return 1
	}
	return 0
}

// Config sizes the grab.
type Config struct {
	Instances int           // service instances, at least 2
	Drivers   int           // drivers per instance, at least 1
	Work      time.Duration // between the check and the write, at least 0
}

// Mode is how drivers guard the check-then-write.
type Mode string

// The modes, in the order Run tries them.
const (
	ModeNone      Mode = "none"
	ModeLocal     Mode = "local mutex"
	ModeRedisLock Mode = "redislock"
)

// Report is how many drivers believed they won the order, per mode.
type Report struct {
	Winners map[Mode]int
}

// Run grabs one order per mode on an embedded Redis and prints the result
// to w.
func Run(ctx context.Context, cfg Config, w io.Writer) (Report, error) {
	if cfg.Instances < 2 || cfg.Drivers < 1 || cfg.Work < 0 {
		return Report{}, fmt.Errorf("need at least 2 instances, 1 driver each and a work time ≥ 0 (got %+v)", cfg)
	}
	srv, err := miniredis.Run()
	if err != nil {
		return Report{}, err
	}
	defer srv.Close()
	rep := Report{Winners: map[Mode]int{}}
	fmt.Fprintf(w, "%d instances × %d drivers grab order 42 at once\n", cfg.Instances, cfg.Drivers)
	for _, mode := range []Mode{ModeNone, ModeLocal, ModeRedisLock} {
		n, err := grab(ctx, srv.Addr(), cfg, mode)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", mode, err)
		}
		rep.Winners[mode] = n
		verdict := "correct"
		if n != 1 {
			verdict = "WRONG: the order went to several drivers"
		}
		fmt.Fprintf(w, "  %-12s winners: %2d  %s\n", mode, n, verdict)
	}
	return rep, nil
}

// grab runs one round: every driver checks the order and takes it if open.
func grab(ctx context.Context, addr string, cfg Config, mode Mode) (int, error) {
	order := "order:42:" + string(mode)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners int
		errs    []error
	)
	start := make(chan struct{})
	for i := range cfg.Instances {
		client := redis.NewClient(&redis.Options{Addr: addr})
		defer client.Close()
		// Connected before the start: a dial inside the race window would
		// let one instance finish before the others begin.
		if err := client.Ping(ctx).Err(); err != nil {
			return 0, err
		}
		var local sync.Mutex // one per instance, as a process-local lock is
		locker, err := redislock.New(client, order, locks.WithTTL(10*time.Second))
		if err != nil {
			return 0, err
		}
		for d := range cfg.Drivers {
			driver := fmt.Sprintf("driver-%d-%d", i, d)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				won, err := take(ctx, client, order, driver, cfg.Work, mode, &local, locker)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				}
				if won {
					winners++
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	return winners, errors.Join(errs...)
}

// take is one driver's attempt: the seeds' check-then-write, guarded as mode
// says. It reports whether the driver believes it got the order.
func take(ctx context.Context, c *redis.Client, order, driver string, work time.Duration,
	mode Mode, local *sync.Mutex, locker *redislock.Locker) (bool, error) {
	switch mode {
	case ModeLocal:
		local.Lock()
		defer local.Unlock()
	case ModeRedisLock:
		lease, err := locker.Lock(ctx)
		if err != nil {
			return false, err
		}
		defer lease.Unlock(context.WithoutCancel(ctx))
	}
	taken, err := c.Get(ctx, order).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, err
	}
	if taken != "" {
		return false, nil // someone has it
	}
	time.Sleep(work) // pricing, dispatch...: the window the race lives in
	return true, c.Set(ctx, order, driver, 0).Err()
}
