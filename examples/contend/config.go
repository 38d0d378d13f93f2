package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// Config is one run of the workload.
type Config struct {
	// Workers is the number of goroutines contending on the lock, spread as
	// evenly as possible over Procs. Default 32.
	Workers int
	// Procs is the number of simulated processes, each with its own Redis
	// client and its own *redislock.Locker. Default 4; at most Workers.
	Procs int
	// Rounds is the number of acquisitions each worker makes. Default 200.
	Rounds int
	// TTL is the lease TTL. Default locks.DefaultTTL.
	TTL time.Duration
	// RedisAddr is the host:port of a real Redis server. Default "": an
	// embedded miniredis on a loopback port.
	RedisAddr string
}

// DefaultConfig returns the settings `go run ./examples/contend` uses.
func DefaultConfig() Config {
	return Config{Workers: 32, Procs: 4, Rounds: 200, TTL: locks.DefaultTTL}
}

// errConfig is wrapped by every Config validation error.
var errConfig = errors.New("invalid config")

func (c Config) validate() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("%w: %d workers (need at least 1)", errConfig, c.Workers)
	case c.Procs < 1 || c.Procs > c.Workers:
		return fmt.Errorf("%w: %d procs (need 1 to %d, the number of workers)", errConfig, c.Procs, c.Workers)
	case c.Rounds < 1:
		return fmt.Errorf("%w: %d rounds (need at least 1)", errConfig, c.Rounds)
	case c.TTL < locks.MinTTL:
		return fmt.Errorf("%w: TTL %v (need at least %v)", errConfig, c.TTL, locks.MinTTL)
	}
	return nil
}

// workersOf returns how many of the workers process p runs: the workers are
// dealt out like cards, so the counts differ by at most one.
func (c Config) workersOf(p int) int {
	n := c.Workers / c.Procs
	if p < c.Workers%c.Procs {
		n++
	}
	return n
}

// total is the number of increments a run makes: Workers × Rounds.
func (c Config) total() int { return c.Workers * c.Rounds }
