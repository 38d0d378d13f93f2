package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/lockproof/lockproof/locks"
)

// Kind names a fault a nemesis can schedule. What each does is up to the
// Injector given to Run: the kinds only fix the vocabulary, so that a printed
// schedule reads the same for every backend.
type Kind string

// The fault kinds. Target names a node, link or client (see FaultSet);
// Duration is how long the fault lasts or how far it moves a clock.
const (
	// KindPartition isolates Target for Duration, then heals it.
	KindPartition Kind = "partition"
	// KindLatency adds Duration of latency to Target's links until the next
	// heal of Target.
	KindLatency Kind = "latency"
	// KindDropReplies drops Target's replies for Duration.
	KindDropReplies Kind = "drop-replies"
	// KindReset resets Target's connections.
	KindReset Kind = "reset"
	// KindPause pauses client Target for Duration (a GC pause).
	KindPause Kind = "pause"
	// KindCrash crashes client Target: it never renews nor unlocks again.
	KindCrash Kind = "crash"
	// KindExpire expires Target's current lease on the backend now.
	KindExpire Kind = "expire"
	// KindClockJump moves node Target's clock forward by Duration.
	KindClockJump Kind = "clock-jump"
	// KindRestart restarts node Target, without its data, after Duration
	// down.
	KindRestart Kind = "restart"
	// KindAdvance advances every backend clock by Duration.
	KindAdvance Kind = "advance"
)

// Fault is one scheduled fault.
type Fault struct {
	// At is when it starts, from the start of the run.
	At time.Duration
	// Kind says what it is.
	Kind Kind
	// Target is the node, link or client it hits ("" for KindAdvance).
	Target string
	// Duration is how long it lasts or how far it moves a clock.
	Duration time.Duration
}

// String is the fault as one line of a printed schedule:
// "+1.5s partition node2 for 300ms".
func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "+%v %s", f.At, f.Kind)
	if f.Target != "" {
		fmt.Fprintf(&b, " %s", f.Target)
	}
	if f.Duration != 0 {
		fmt.Fprintf(&b, " for %v", f.Duration)
	}
	return b.String()
}

// FaultSet is what a nemesis may do, and to whom.
type FaultSet struct {
	// Kinds are the faults to draw from; each draw picks one uniformly.
	Kinds []Kind
	// Targets lists, per kind, the names it may hit; a kind with no list
	// (KindAdvance) has no target.
	Targets map[Kind][]string
	// MaxDuration bounds each fault's Duration; at least 1 ms.
	MaxDuration time.Duration
}

// Schedule is a list of faults in order of At. Its String form, one fault
// per line, parses back with ParseSchedule, so a printed run replays.
type Schedule []Fault

func (s Schedule) String() string {
	lines := make([]string, len(s))
	for i, f := range s {
		lines[i] = f.String()
	}
	return strings.Join(lines, "\n")
}

// Plan draws n faults spread over span from seed: the same seed, set, span
// and n always give the same schedule.
func Plan(seed uint64, set FaultSet, span time.Duration, n int) (Schedule, error) {
	switch {
	case len(set.Kinds) == 0:
		return nil, errors.New("nemesis: no fault kinds")
	case span <= 0 || n < 0:
		return nil, fmt.Errorf("nemesis: span %v and count %d must be positive", span, n)
	case set.MaxDuration < time.Millisecond:
		return nil, fmt.Errorf("nemesis: MaxDuration %v below 1ms", set.MaxDuration)
	}
	for _, k := range set.Kinds {
		if k != KindAdvance && len(set.Targets[k]) == 0 {
			return nil, fmt.Errorf("nemesis: kind %s has no targets", k)
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	s := make(Schedule, n)
	for i := range s {
		k := set.Kinds[rng.IntN(len(set.Kinds))]
		f := Fault{
			At:   time.Duration(rng.Int64N(int64(span))).Truncate(time.Millisecond),
			Kind: k,
			// Whole milliseconds, at least one, so that String round-trips.
			Duration: time.Duration(1+rng.Int64N(int64(set.MaxDuration/time.Millisecond))) * time.Millisecond,
		}
		if k == KindReset || k == KindCrash || k == KindExpire {
			f.Duration = 0
		}
		if ts := set.Targets[k]; len(ts) > 0 {
			f.Target = ts[rng.IntN(len(ts))]
		}
		s[i] = f
	}
	slices.SortStableFunc(s, func(a, b Fault) int { return int(a.At - b.At) })
	return s, nil
}

// ParseSchedule reads a schedule printed by Schedule.String.
func ParseSchedule(text string) (Schedule, error) {
	var s Schedule
	for i, line := range strings.Split(strings.TrimSpace(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f, err := parseFault(line)
		if err != nil {
			return nil, fmt.Errorf("nemesis: line %d %q: %w", i+1, line, err)
		}
		if len(s) > 0 && f.At < s[len(s)-1].At {
			return nil, fmt.Errorf("nemesis: line %d %q: out of order", i+1, line)
		}
		s = append(s, f)
	}
	return s, nil
}

func parseFault(line string) (Fault, error) {
	words := strings.Fields(line)
	if len(words) < 2 || !strings.HasPrefix(words[0], "+") {
		return Fault{}, errors.New(`want "+<at> <kind> [target] [for <duration>]"`)
	}
	at, err := time.ParseDuration(words[0][1:])
	if err != nil || at < 0 {
		return Fault{}, fmt.Errorf("bad time %q", words[0])
	}
	f := Fault{At: at, Kind: Kind(words[1])}
	rest := words[2:]
	if n := len(rest); n >= 2 && rest[n-2] == "for" {
		if f.Duration, err = time.ParseDuration(rest[n-1]); err != nil || f.Duration <= 0 {
			return Fault{}, fmt.Errorf("bad duration %q", rest[n-1])
		}
		rest = rest[:n-2]
	}
	switch len(rest) {
	case 0:
	case 1:
		f.Target = rest[0]
	default:
		return Fault{}, fmt.Errorf("unexpected %q", strings.Join(rest, " "))
	}
	return f, nil
}

// Injector applies one fault to the system under test.
type Injector func(ctx context.Context, f Fault) error

// Run applies the schedule's faults in order, each once the clock has
// reached its At from the moment Run starts: with a manual clock the test
// drives the schedule by advancing it. It stops at the first injector error
// (wrapped with the fault) or when ctx ends.
func (s Schedule) Run(ctx context.Context, clock locks.Clock, inject Injector) error {
	if clock == nil || inject == nil {
		return errors.New("nemesis: nil clock or injector")
	}
	start := clock.Now()
	for _, f := range s {
		if wait := f.At - clock.Now().Sub(start); wait > 0 {
			t := clock.NewTimer(wait)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		if err := inject(ctx, f); err != nil {
			return fmt.Errorf("nemesis: %s: %w", f, err)
		}
	}
	return nil
}
