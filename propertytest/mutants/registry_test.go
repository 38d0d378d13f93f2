package mutants

import (
	"slices"
	"strings"
	"testing"
)

// The mutants this file's package must always hold: their names are
// user-facing (lockproof check -locks mutant/<name>).
var required = map[string]string{
	"unlock-without-owner-check":         "symmetry",
	"grant-without-check":                "exclusivity",
	"no-expiry":                          "deadlock freedom",
	"shared-fencing-token":               "exclusivity",
	"setnx-then-expire":                  "deadlock freedom",
	"no-renewal-while-work-outlasts-ttl": "exclusivity",
	"fence-does-not-grow":                "exclusivity",
	"redlock-accepts-minority":           "exclusivity",
	"redis-without-fencing-under-pause":  "exclusivity",
	"single-node-posing-as-three":        "availability",
	// Bugs reported against real locks (issue 18's five classes).
	"unlock-get-then-del":            "symmetry",
	"expired-takeover-get-then-set":  "exclusivity",
	"validity-adds-drift":            "exclusivity",
	"deadline-from-reply":            "exclusivity",
	"renew-ignores-refusal":          "exclusivity",
	"renew-sets-without-owner-check": "exclusivity",
	"renew-extends-any-owner":        "exclusivity",
	"refused-attempt-node-left":      "deadlock freedom",
	"fair-queue-entry-left":          "deadlock freedom",
	"renewal-failure-only-logged":    "exclusivity",
	"done-waits-for-server":          "exclusivity",
	// ZooKeeper lock bugs (issue 21).
	"zk-waiter-without-recheck":     "exclusivity",
	"zk-cancelled-waiter-node-left": "deadlock freedom",
	"zk-renew-checks-session-only":  "symmetry",
}

func TestRequiredMutantsAreRegistered(t *testing.T) {
	for name, breaks := range required {
		m, err := Lookup(name)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if string(m.Breaks) != breaks {
			t.Errorf("%s breaks %q, want %q", name, m.Breaks, breaks)
		}
	}
}

func TestAllIsSortedAndUnique(t *testing.T) {
	ms := All()
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
		if m.Bug == "" || m.Factory == nil || m.Breaks == "" {
			t.Errorf("mutant %q is incomplete", m.Name)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("All is not sorted by name: %v", names)
	}
	if c := slices.Compact(slices.Clone(names)); len(c) != len(names) {
		t.Errorf("duplicate names in %v", names)
	}
}

func TestLookupUnknownListsTheKnownNames(t *testing.T) {
	_, err := Lookup("no-such-mutant")
	if err == nil {
		t.Fatal("Lookup of an unknown name succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, `"no-such-mutant"`) {
		t.Errorf("error %q does not name what was asked for", msg)
	}
	for _, m := range All() {
		if !strings.Contains(msg, m.Name) {
			t.Errorf("error %q does not list %s", msg, m.Name)
		}
	}
}

func TestRegisterRejectsDuplicatesAndIncompleteMutants(t *testing.T) {
	saved := slices.Clone(registry)
	t.Cleanup(func() { registry = saved })
	m := All()[0]
	for name, bad := range map[string]Mutant{
		"duplicate":  m,
		"no name":    {Breaks: m.Breaks, Factory: m.Factory},
		"no breaks":  {Name: "x", Factory: m.Factory},
		"no factory": {Name: "y", Breaks: m.Breaks},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("register accepted a mutant with %s", name)
				}
			}()
			register(bad)
		}()
	}
}

// Every corpus entry names a registered mutant and a property that mutant
// may be caught with.
func TestCorpusNamesRegisteredMutants(t *testing.T) {
	for name, c := range corpus {
		m, err := Lookup(name)
		switch {
		case err != nil:
			t.Errorf("corpus: %v", err)
		case len(c.seeds) == 0 || slices.Contains(c.seeds, 0):
			t.Errorf("corpus: %s has seeds %v: none, or 0, which asks rapid for a random one", name, c.seeds)
		case c.breaks != m.Breaks && !slices.Contains(m.AlsoBreaks, c.breaks):
			t.Errorf("corpus: %s is caught as %s, which is neither %s nor one of %v", name, c.breaks, m.Breaks, m.AlsoBreaks)
		}
	}
	for _, name := range inexact {
		if _, err := Lookup(name); err != nil {
			t.Errorf("inexact: %v", err)
		}
	}
}
