package propertytest

import (
	"github.com/lockproof/lockproof/locks"
)

// The state of one client of the lock, as the suite tracks it: what it
// believes it holds, what it is doing, and the leases it let lapse.

// held is one lease as the suite tracks it.
type held struct {
	lease  locks.Lease
	owner  uint64 // the suite's name for the acquisition, in the lease history
	token  uint64 // the fencing token, or a synthetic one without fencing
	fenced bool
	shared bool // a read lease of a read-write lock (Options.ReadWrite)
	// proved is the history time at which the last grant or renewal of the
	// lease returned: the backend may keep the lease until TTL after it,
	// whatever the holder believes.
	proved int64
	// faultEvents is the machine's faults.events at the acquisition's call.
	faultEvents int
}

// work is a read-modify-write begun (read done) and not yet written.
type work struct {
	h      *held
	read   int
	writes int // admitted writes before the read
}

// client is one process using the lock.
type client struct {
	id     int
	locker locks.Locker
	reader locks.Locker // with Options.ReadWrite, the Locker of shared leases
	read   bool         // its next acquisition is shared (drawn by drawMode)
	cur    *held        // the lease it believes it holds
	stale  []*held      // leases that ran out without an Unlock: used for foreign calls
	op     *op          // a live operation: stalled at a gate, or a Lock waiting
	fin    func()       // what the driver does once op finished
	work   *work
	inner  []locks.Lease // nested holds on cur (Options.Reentrant), innermost last
	gen    int           // Lockers made for it so far: one more after each crash
}

// unlocking reports whether c has an Unlock in progress.
func (c *client) unlocking() bool { return c.op != nil && c.op.name == "Unlock" }

// free reports whether c neither holds a lease nor runs an operation.
func (c *client) free() bool { return c.cur == nil && c.op == nil }

// idle reports whether c holds a lease and runs no operation.
func (c *client) idle() bool { return c.cur != nil && c.op == nil }
