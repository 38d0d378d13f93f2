package mutants

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lockproof/lockproof/propertytest"
)

// Mutant is one deliberately broken lock.
type Mutant struct {
	// Name identifies the mutant ("unlock-without-owner-check").
	Name string
	// Bug says in one sentence what is wrong with it.
	Bug string
	// Breaks is the property the suite must report violated.
	Breaks propertytest.Property
	// AlsoBreaks are properties the same bug breaks by another path, which
	// the suite may find first: a renewal that reports success when the
	// backend refused it breaks exclusivity when the holder goes on
	// believing in its lease, and symmetry when the renewal came through a
	// lease that had run out.
	AlsoBreaks []propertytest.Property
	// Factory builds the broken lock on its backend.
	Factory propertytest.Factory
	// Options are the suite options to run it with (the claims of the lock
	// it imitates).
	Options propertytest.Options
	// Fixed, if set, builds the same lock on the same backend without the
	// bug. Run with the same Options it must pass: that shows the mutant is
	// caught for its bug, not for something in the harness or the backend.
	Fixed propertytest.Factory
	// RealTime marks a mutant whose backend keeps real time (an embedded
	// etcd's leases): each run takes seconds, and catching it can take a
	// minute.
	RealTime bool

	_ struct{} // keyed literals only
}

// settle is the Options.Settle of the mutants here: their backends are
// in-process fakes that answer a woken Lock within a millisecond, so the
// suite need not give it the default 20 ms of wall time after every move.
const settle = 5 * time.Millisecond

// checkSteps is the Options.CheckSteps of the mutants here. The history
// of a broken lock can be costly to decide (a foreign Unlock of unknown
// outcome that freed someone else's lease multiplies the orders to try):
// rather than spend the default on one run, leave it undecided and let the
// next run catch the bug. It is a count of steps, not a time, so that a
// corpus seed is caught at the same run under -race and under load.
const checkSteps = 500_000

// claiming returns the Options of a lock that claims to survive kinds
// (none: the suite's default, crash and pause).
func claiming(kinds ...propertytest.FaultKind) propertytest.Options {
	return propertytest.Options{Claims: kinds, Settle: settle, CheckSteps: checkSteps}
}

// registry holds every mutant, filled by the init functions of the files
// that define them.
var registry []Mutant

// register adds mutants to the registry; a duplicate name is a programming
// error caught at start-up.
func register(ms ...Mutant) {
	for _, m := range ms {
		if m.Name == "" || m.Breaks == "" || m.Factory == nil {
			panic(fmt.Sprintf("mutants: incomplete mutant %+v", m))
		}
		if slices.ContainsFunc(registry, func(o Mutant) bool { return o.Name == m.Name }) {
			panic("mutants: duplicate mutant " + m.Name)
		}
		registry = append(registry, m)
	}
}

// All returns every mutant, sorted by name.
func All() []Mutant {
	out := slices.Clone(registry)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the mutant called name, or an error that lists the names.
func Lookup(name string) (Mutant, error) {
	for _, m := range registry {
		if m.Name == name {
			return m, nil
		}
	}
	names := make([]string, 0, len(registry))
	for _, m := range All() {
		names = append(names, m.Name)
	}
	return Mutant{}, fmt.Errorf("mutants: no mutant %q (known: %s)", name, strings.Join(names, ", "))
}

// also returns m with ps added to its AlsoBreaks.
func (m Mutant) also(ps ...propertytest.Property) Mutant {
	m.AlsoBreaks = append(slices.Clone(m.AlsoBreaks), ps...)
	return m
}
