package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// Config is one run: readers that read the whole configuration again and
// again, and reloaders that rewrite it, part by part.
type Config struct {
	Backend string        // "redis", "etcd", "consul" or "zk"
	Procs   int           // processes, each with its own client and read-write lock
	Readers int           // readers over all processes
	Writers int           // reloaders over all processes
	Reloads int           // reloads in all, shared among the reloaders
	Parts   int           // parts of the configuration, written and read one at a time
	Step    time.Duration // the time between two parts of a read or a write
}

// DefaultConfig is 8 readers and 2 reloaders in 4 processes, 20 reloads of
// a configuration of 4 parts, on miniredis.
func DefaultConfig() Config {
	return Config{Backend: "redis", Procs: 4, Readers: 8, Writers: 2, Reloads: 20, Parts: 4, Step: 200 * time.Microsecond}
}

var errConfig = errors.New("bad configuration")

func (c Config) validate() error {
	switch {
	case c.Readers < 0 || c.Writers < 1 || c.Procs < 1 || c.Procs > c.Readers+c.Writers:
		return fmt.Errorf("%w: %d readers and %d reloaders in %d processes", errConfig, c.Readers, c.Writers, c.Procs)
	case c.Reloads < 1:
		return fmt.Errorf("%w: %d reloads", errConfig, c.Reloads)
	case c.Parts < 2:
		return fmt.Errorf("%w: %d parts (a configuration of one part cannot be torn)", errConfig, c.Parts)
	case c.Step < 0:
		return fmt.Errorf("%w: step %v", errConfig, c.Step)
	}
	return nil
}

// Seen is what the configuration store observed of one run, from outside
// the readers and reloaders.
type Seen struct {
	Reads        int // reads completed
	Torn         int // reads that saw parts of two versions
	MostReaders  int // the most reads in progress at once
	Reloads      int // reloads applied
	Overlaps     int // reloads that began while a read or another reload was in progress
	StaleRefused int // reloads refused for a fencing token below one the store had seen
}

// Report is what the store saw through the lock and without it.
type Report struct {
	Reloads  int  // reloads asked for
	Locked   Seen // through the read-write lock
	Unlocked Seen // with no lock
}

// OK reports whether, through the lock, no read was torn, no reload
// overlapped a read or another reload, none was refused as stale and
// every one was applied.
func (r Report) OK() bool {
	l := r.Locked
	return l.Torn == 0 && l.Overlaps == 0 && l.StaleRefused == 0 && l.Reloads == r.Reloads
}

// store is the configuration: Parts values, each "v<version>" of the
// version that wrote it. It counts the reads and reloads in progress, and
// fences reloads: one whose token is not above every token it has been
// shown (by reloads and by reads) is refused, so a reloader whose lease
// ran out while it was paused cannot overwrite what came after it.
type store struct {
	step    time.Duration
	mu      sync.Mutex
	parts   []string
	version int
	reading int
	writing int
	highest locks.Token
	seen    Seen
}

func newStore(parts int, step time.Duration) *store {
	s := &store{step: step, parts: make([]string, parts)}
	for i := range s.parts {
		s.parts[i] = "v0"
	}
	return s
}

// read reads every part, one at a time, and reports whether they were of
// one version. token is the reader's fencing token, 0 without one.
func (s *store) read(token locks.Token) {
	s.mu.Lock()
	s.reading++
	s.seen.MostReaders = max(s.seen.MostReaders, s.reading)
	s.highest = max(s.highest, token)
	first := s.parts[0]
	s.mu.Unlock()
	torn := false
	for i := 1; i < len(s.parts); i++ {
		time.Sleep(s.step)
		s.mu.Lock()
		torn = torn || s.parts[i] != first
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.reading--
	s.seen.Reads++
	if torn {
		s.seen.Torn++
	}
	s.mu.Unlock()
}

// reload writes the next version, one part at a time; token is the
// reloader's fencing token, 0 without one (and then not fenced).
func (s *store) reload(token locks.Token) {
	s.mu.Lock()
	if token != 0 && token <= s.highest {
		s.seen.StaleRefused++
		s.mu.Unlock()
		return
	}
	s.highest = max(s.highest, token)
	if s.reading > 0 || s.writing > 0 {
		s.seen.Overlaps++
	}
	s.writing++
	s.version++
	next := "v" + strconv.Itoa(s.version)
	s.mu.Unlock()
	for i := range s.parts {
		if i > 0 {
			time.Sleep(s.step)
		}
		s.mu.Lock()
		s.parts[i] = next
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.writing--
	s.seen.Reloads++
	s.mu.Unlock()
}

func (s *store) report() Seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}

// Run reloads the configuration under readers through the read-write lock
// on cfg's backend, then with no lock, and narrates both to w.
func Run(ctx context.Context, cfg Config, w io.Writer) (Report, error) {
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	be, err := startBackend(cfg.Backend)
	if err != nil {
		return Report{}, err
	}
	defer be.close()
	return runOn(ctx, cfg, be, w)
}

// runOn is Run on a backend already started.
func runOn(ctx context.Context, cfg Config, be *backend, w io.Writer) (Report, error) {
	var err error
	procs := make([]rwLock, cfg.Procs)
	for i := range procs {
		if procs[i], err = be.lock("config"); err != nil {
			return Report{}, err
		}
	}
	fmt.Fprintf(w, "%d readers and %d reloaders in %d processes, %d reloads of a configuration of %d parts (%s)\n",
		cfg.Readers, cfg.Writers, cfg.Procs, cfg.Reloads, cfg.Parts, be.name)
	rep := Report{Reloads: cfg.Reloads}
	locked := newStore(cfg.Parts, cfg.Step)
	err = contend(ctx, cfg,
		func(ctx context.Context, reader int) error {
			lease, err := procs[reader%cfg.Procs].read.Lock(ctx)
			if err != nil {
				return err
			}
			tok, _ := lease.Token()
			locked.read(tok)
			return lease.Unlock(ctx)
		},
		func(ctx context.Context, writer int) error {
			// Reloaders are spread over the processes after the readers.
			lease, err := procs[(cfg.Readers+writer)%cfg.Procs].write.Lock(ctx)
			if err != nil {
				return err
			}
			tok, _ := lease.Token()
			locked.reload(tok)
			return lease.Unlock(ctx)
		})
	if err != nil {
		return rep, err
	}
	rep.Locked = locked.report()
	unlocked := newStore(cfg.Parts, cfg.Step)
	err = contend(ctx, cfg,
		func(context.Context, int) error { unlocked.read(0); return nil },
		func(context.Context, int) error { unlocked.reload(0); return nil })
	if err != nil {
		return rep, err
	}
	rep.Unlocked = unlocked.report()
	narrate(w, rep)
	return rep, nil
}

// contend runs cfg.Readers readers, each calling read until the reloads
// are done, and cfg.Writers reloaders sharing cfg.Reloads calls of reload
// among them. The first error ends the run.
func contend(ctx context.Context, cfg Config, read, reload func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reloads := make(chan struct{})
	stop := make(chan struct{})
	errs := make(chan error, cfg.Readers+cfg.Writers)
	fail := func(err error) {
		errs <- err
		cancel()
	}
	var readers, writers sync.WaitGroup
	for r := range cfg.Readers {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				if err := read(ctx, r); err != nil {
					fail(fmt.Errorf("reader %d: %w", r, err))
					return
				}
			}
		})
	}
	for wr := range cfg.Writers {
		writers.Go(func() {
			for range reloads {
				if err := reload(ctx, wr); err != nil {
					fail(fmt.Errorf("reloader %d: %w", wr, err))
					return
				}
			}
		})
	}
	writers.Go(func() {
		defer close(reloads)
		for range cfg.Reloads {
			select {
			case reloads <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	})
	writers.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func narrate(w io.Writer, r Report) {
	l, u := r.Locked, r.Unlocked
	fmt.Fprintf(w, "  through the lock: %d reloads applied of %d, %d reads, up to %d at once; %d torn reads, %d reloads overlapping a read or a reload, %d refused as stale\n",
		l.Reloads, r.Reloads, l.Reads, l.MostReaders, l.Torn, l.Overlaps, l.StaleRefused)
	fmt.Fprintf(w, "  without it:       %d reloads, %d reads; %d torn reads, %d reloads overlapping a read or a reload\n",
		u.Reloads, u.Reads, u.Torn, u.Overlaps)
	if r.OK() {
		fmt.Fprintln(w, "PASS: through the lock no reader saw a half-written configuration")
	} else {
		fmt.Fprintln(w, "FAIL: the lock let a reload overlap a read or another reload")
	}
}
