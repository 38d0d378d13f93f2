package chaos

import (
	"context"
	"time"
)

// The time and expiry faults reach a backend through these small
// interfaces, which the fakes implement (fakes.RedisServer and RedisNodes:
// all three; fakes.MySQLServer, EtcdServer and ConsulServer: Expirer, since
// their servers keep their own time; ConsulServer also advances miniconsul's
// manual clock).

// Clocked is a backend whose clock a test drives.
type Clocked interface {
	// Advance moves the backend's clock, and the manual clock of the
	// clients that use it, forward by d.
	Advance(d time.Duration)
}

// Expirer ends a lock's current lease on the backend now, as if its holder
// had stopped renewing a whole TTL ago.
type Expirer interface {
	ExpireLock(ctx context.Context, name string) error
}

// NodeClocks is a group of independent nodes whose clocks can disagree.
type NodeClocks interface {
	// JumpNode moves node i's clock forward by d, alone: its TTLs run out
	// d early.
	JumpNode(i int, d time.Duration)
}
