package propertytest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// This file lends the external tests (package propertytest_test, which may
// import propertytest/backends) what they need of the package's insides.

// volatile matches what a run's log may hold that no seed fixes: the
// ports of in-process servers, the fakes' random key prefixes, the ids
// the servers draw (Consul sessions) and the GUIDs locks draw (zklock's
// node names, from locks.NewOwner).
// The histories themselves are compared as they are.
var volatile = regexp.MustCompile(`127\.0\.0\.1:\d+|lockproof-test-[0-9a-f]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}`)

// TraceRuns runs the suite on factory with rapid's current flags and
// returns, per run, its log and its lock and register histories as text.
func TraceRuns(t *testing.T, factory Factory, o Options) []string {
	t.Helper()
	s, err := newSuite(t, factory, o)
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	s.trace = func(m *machine) {
		lockH, regH, _ := m.rec.histories()
		var b strings.Builder
		b.WriteString(volatile.ReplaceAllString(strings.Join(m.log, "\n"), "<id>"))
		b.WriteString("\n--- lock history\n")
		b.WriteString(describeLockOps(m.lock, lockH, len(lockH)))
		b.WriteString("--- register history\n")
		for _, op := range regH {
			fmt.Fprintf(&b, "client %d at %d: %+v -> %+v\n", op.ClientID, op.Call, op.Input, op.Output)
		}
		runs = append(runs, b.String())
	}
	rapid.Check(t, s.prop)
	return runs
}
