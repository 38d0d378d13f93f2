package chaos

// Kind names a class of fault. It is the project's one fault vocabulary:
// chaos injects these faults, the fakes provide the backend ones (a node
// stopped, a node's clock jumped), and a lock claims to survive some of
// them (propertytest.Options.Claims, whose FaultKind is this type). A
// printed kind reads the same for every backend.
type Kind string

// The fault kinds.
const (
	// KindCrash: a client stops without unlocking (its lease is left to
	// expire) and comes back as a fresh process (Crash, CrashAt).
	KindCrash Kind = "crash"
	// KindPause: a holder stalls between checking its lease and writing,
	// as a GC pause would, past its lease's deadline (Pause, PauseAt).
	// Only fencing makes a lock safe against it.
	KindPause Kind = "pause"
	// KindPartition: the network between clients and a backend node loses
	// or holds messages (Proxy.Partition, Proxy.Cut, Proxy.DropReplies).
	KindPartition Kind = "partition"
	// KindLatency: a link delays its bytes (Proxy.SetLatency).
	KindLatency Kind = "latency"
	// KindReset: a link resets its connections or refuses new ones
	// (Proxy.ResetAll, Proxy.Refuse).
	KindReset Kind = "reset"
	// KindNodeDown: a backend node stops, and later restarts with its data
	// (the fakes' StopNode and StartNode).
	KindNodeDown Kind = "node-down"
	// KindFailover: a primary is replaced by an asynchronously fed replica
	// that may have missed the last writes (Proxy.Replicate,
	// Proxy.Promote).
	KindFailover Kind = "failover"
	// KindClockJump: one backend node's clock jumps forward (the fakes'
	// JumpNode; a session expired early).
	KindClockJump Kind = "clock-jump"
)
