// Command singlejob runs a nightly job on N replicas of a service, where
// the job must run exactly once: every replica tries the job's lock, and
// only the one that gets it runs the job. When that replica crashes while
// holding the lock (it never unlocks, its watchdog stops), nobody runs the
// job twice; once the lease has expired another replica takes over.
//
// Time is simulated: the run takes milliseconds. The program exits with
// status 1 if the job ever ran more than once at a time or never recovered.
//
//	go run ./examples/singlejob
//	go run ./examples/singlejob -replicas 8
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

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("singlejob", flag.ContinueOnError)
	fs.SetOutput(stderr)
	replicas := fs.Int("replicas", 5, "replicas of the service, each with its own Redis client")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, *replicas, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "singlejob: %v\n", err)
		return 1
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

// Report says who ran the job in each round.
type Report struct {
	First      []int // replicas that ran it in the first round
	AfterDeath []int // replicas that ran it while the first runner was dead but its lease live
	Recovery   []int // replicas that ran it after the lease expired
}

// OK reports whether exactly one replica ran the job in the first round,
// none while the crashed runner's lease was live, and exactly one other
// after it expired.
func (r Report) OK() bool {
	return len(r.First) == 1 && len(r.AfterDeath) == 0 && len(r.Recovery) == 1 && r.Recovery[0] != r.First[0]
}

const ttl = 30 * time.Second

// Run plays three rounds on an embedded Redis and narrates them to w.
func Run(ctx context.Context, replicas int, w io.Writer) (Report, error) {
	if replicas < 2 {
		return Report{}, fmt.Errorf("need at least 2 replicas, got %d", replicas)
	}
	srv, err := miniredis.Run()
	if err != nil {
		return Report{}, err
	}
	defer srv.Close()
	start := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	srv.SetTime(start)
	clock := fakes.NewClock(start)
	crashes := make([]*chaos.Crash, replicas)
	lockers := make([]*redislock.Locker, replicas)
	for i := range replicas {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer c.Close()
		crashes[i] = chaos.CrashAt(0)
		l, err := redislock.New(c, "nightly-report", locks.WithTTL(ttl), locks.WithClock(clock), locks.WithObserver(crashes[i]))
		if err != nil {
			return Report{}, err
		}
		lockers[i] = l
	}
	var rep Report
	var held []locks.Lease // leases still held at the end, by live replicas
	defer func() {
		for _, l := range held {
			_ = l.Unlock(context.WithoutCancel(ctx))
		}
	}()

	// round runs every live replica's attempt at once and returns who ran.
	round := func(dead int) ([]int, error) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		var ran []int
		var errs []error
		for i, l := range lockers {
			if i == dead {
				continue
			}
			wg.Go(func() {
				lease, err := l.TryLock(ctx)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, locks.ErrLocked):
				case err != nil:
					errs = append(errs, err)
				default:
					ran = append(ran, i)
					held = append(held, lease)
				}
			})
		}
		wg.Wait()
		return ran, errors.Join(errs...)
	}

	fmt.Fprintf(w, "%d replicas, one nightly job, lease TTL %v\n", replicas, ttl)
	if rep.First, err = round(-1); err != nil {
		return rep, err
	}
	fmt.Fprintf(w, "  02:00  replicas %v run the job\n", rep.First)
	if len(rep.First) != 1 {
		return rep, nil
	}
	runner := rep.First[0]
	crashes[runner].Now()
	held = held[:0] // the crashed runner never unlocks
	fmt.Fprintf(w, "  02:00  replica %d crashes while running it (no unlock, no renewal)\n", runner)
	if rep.AfterDeath, err = round(runner); err != nil {
		return rep, err
	}
	fmt.Fprintf(w, "  02:00  the others try again: replicas %v run it\n", rep.AfterDeath)
	srv.FastForward(ttl + time.Second)
	srv.SetTime(clock.Now().Add(ttl + time.Second))
	clock.Advance(ttl + time.Second)
	if rep.Recovery, err = round(runner); err != nil {
		return rep, err
	}
	fmt.Fprintf(w, "  02:00:%02d  the lease has expired: replicas %v run it\n", int((ttl + time.Second).Seconds()), rep.Recovery)
	return rep, nil
}
