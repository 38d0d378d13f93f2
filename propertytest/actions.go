package propertytest

import (
	"slices"

	"pgregory.net/rapid"
)

// The state machine's actions, as a table: each family of actions keeps its
// entries, and what they call, in a file of its own (actions_*.go). rapid
// draws among the entries by name (T.Repeat sorts the names), so an entry's
// place in the table does not matter, and its name must not change: the
// names are part of what a seed replays.

// action is one entry of the table.
type action struct {
	name string
	// on reports whether a run has the action at all (nil: every run).
	on func(m *machine) bool
	// who, when set, picks the client the action is for: rapid draws one
	// of the clients it accepts, and the action is skipped when none is.
	who func(m *machine, c *client) bool
	// do is what the action does, for the client drawn (nil without who).
	do func(m *machine, t *rapid.T, c *client)
	// acquires marks an action that starts an acquisition for a client
	// that holds nothing: a fault marked AtAcquire may strike around it.
	acquires bool
}

// actionTable is every action of the state machine.
var actionTable = slices.Concat(acquireActions, releaseActions, workActions,
	reentryActions, interleaveActions, faultActions)

// actions returns the state machine's actions for rapid's Repeat: the
// table's entries this run has, and the check rapid runs after each of
// them (the "" entry), which takes in what finished.
func (m *machine) actions() map[string]func(*rapid.T) {
	acts := map[string]func(*rapid.T){"": func(*rapid.T) { m.collect() }}
	for _, a := range actionTable {
		if a.on != nil && !a.on(m) {
			continue
		}
		acts[a.name] = func(t *rapid.T) {
			var c *client
			if a.who != nil {
				c = m.pick(t, func(c *client) bool { return a.who(m, c) })
			}
			heal := func() {}
			if a.acquires && c.cur == nil {
				heal = m.strikeAtAcquire(t)
			}
			a.do(m, t, c)
			heal()
		}
	}
	return acts
}

// pick draws one of the clients ok accepts, and skips the action when there
// is none. A failure of the harness (fatal) ends the run first.
func (m *machine) pick(t *rapid.T, ok func(c *client) bool) *client {
	if m.fatal != nil {
		t.Fatalf("%v", m.fatal)
	}
	var ids []int
	for _, c := range m.cl {
		if ok(c) {
			ids = append(ids, c.id)
		}
	}
	if len(ids) == 0 {
		t.Skip("no client can do this now")
	}
	return m.cl[rapid.SampledFrom(ids).Draw(t, "client")]
}

// stallNever is the stall point of an operation that runs to its end.
const stallNever = -1

// drawStall draws where an operation stops for a while: mostly nowhere,
// else at its first, second or third gate (a point the lock reports, or a
// request to the backend). Gate 0 is before anything was sent.
func drawStall(t *rapid.T) int {
	if rapid.IntRange(0, 9).Draw(t, "stall?") < 7 {
		return stallNever
	}
	return rapid.IntRange(0, 2).Draw(t, "stall at gate")
}
