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
	// KindNodeDown: a backend node stops abruptly, as a kill (SIGKILL)
	// would stop it, and later restarts with its data (the fakes' StopNode
	// and StartNode, an embedded etcd member's Stop and Restart). A kill
	// followed by a restart with the data is this kind.
	KindNodeDown Kind = "node-down"
	// KindNodeKill: a backend node is killed and restarts without the
	// state it had not made durable (its data directory wiped, or a Redis
	// without persistence): a lock it granted may be forgotten.
	KindNodeKill Kind = "node-kill"
	// KindNodePause: a backend node stops answering but keeps its state
	// and connections (SIGSTOP), then resumes (SIGCONT) unaware of the
	// time that passed: a paused leader may still believe it leads.
	KindNodePause Kind = "node-pause"
	// KindFailover: a primary is replaced by an asynchronously fed replica
	// that may have missed the last writes (Proxy.Replicate,
	// Proxy.Promote).
	KindFailover Kind = "failover"
	// KindClockJump: one backend node's clock jumps forward (the fakes'
	// JumpNode; a session expired early).
	KindClockJump Kind = "clock-jump"
	// KindClockSkew: one backend node's clock runs ahead of or behind the
	// others' for a while (libfaketime), so that its leases and NOW()
	// expire early or late against theirs.
	KindClockSkew Kind = "clock-skew"
)

// Kinds returns every fault kind, in the order of their declaration.
func Kinds() []Kind {
	return []Kind{KindCrash, KindPause, KindPartition, KindLatency, KindReset, KindNodeDown, KindNodeKill,
		KindNodePause, KindFailover, KindClockJump, KindClockSkew}
}
