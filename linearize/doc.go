// Package linearize decides whether a concurrent history is linearizable
// with respect to a sequential model, the judge of lockproof: a false "ok"
// here would bless a broken lock.
//
// The index:
//
//   - Operation: one call of a history, with client, call and return times,
//     input, output, and an explicit Unknown outcome (timed out: it may have
//     taken effect at any instant after its call, or never).
//   - Model: the sequential specification, generic over state, input and
//     output (no interface{} boxing): Init, Step (which may allow several
//     next states), and optional Partition, ReadOnly, ReadHash, Equal,
//     Hash and Describe functions.
//   - Check(ctx, model, history, Options): Ok, Illegal or Unknown (ctx done,
//     Options.TimeLimit passed, Options.MaxMemory reached: never an
//     out-of-memory crash). Result holds a linearization for Ok, a shrunk
//     counterexample for Illegal, the cause for Unknown. Shrinking has a
//     budget of its own (Options.ShrinkTimeLimit, Result.ShrinkElapsed).
//   - Models: NewLeaseModel (a lease lock with TTL, clock tolerance and
//     fencing tokens), NewLeaseFromCallModel (the same for a lock whose
//     lease runs from its call, as Redlock's quorum of copies), NewSemaphoreModel (the same with up to N
//     holders at once), NewRWLeaseModel (readers or one writer, with
//     LeaseInput.Shared), NewRegisterModel, NewFencedRegisterModel (stale
//     tokens rejected, as locks.Fence), NewKVModel (get/put/append
//     partitioned by key, porcupine's test semantics; the state is a
//     KVValue, a string kept as its chain of appends) and NewKVMapModel
//     (the same, unpartitioned).
//   - Pictures: WriteHTML (a self-contained timeline page) and WriteText
//     (for terminals).
//   - DecodeHistory and EncodeHistory: the JSON history format (see
//     json.go), strict about what it accepts.
//   - Spec: a model as a value (its kind and parameters). Bind builds its
//     Checker for a history's types; a File is a history with its Spec,
//     written by EncodeFile and read back by ReadFile (file.go).
//   - The sentinel errors: ErrInvalidModel, ErrInvalidHistory,
//     ErrInvalidOptions, ErrDecode, and ErrTimeLimit and ErrMemoryLimit as
//     causes of Unknown.
//
// # Semantics
//
// A history is linearizable if there is a sequence of its operations that
// contains every operation with a known outcome once, may contain each
// Unknown one at most once, is accepted by the model step by step (the
// outputs of known operations included), and keeps real-time order: an
// operation that returned before another was called comes first. The
// [Call, Return] intervals are closed (equal times are concurrent); an
// Unknown operation never returned. With Model.Partition the history is
// checked per partition, which is exact when the model is a product of
// independent per-key models (linearizability is local).
//
// A counterexample (Result.Counterexample) is minimal for its violation:
// its search stops at the same operation as the whole partition's
// (Result.Blocker), and removing any one operation makes it linearizable
// or makes its search stop elsewhere. Plain 1-minimality would often end at
// one refused acquire, wrong only because the grant that explained it was
// removed.
//
// # Algorithm
//
// Each partition is searched depth first in the manner of Wing & Gong as
// improved by Lowe (and porcupine): the calls and returns sit in a doubly
// linked list in time order; the candidates to linearize next are the calls
// before the first return still in the list; linearizing one lifts its
// events out of the list (dancing links, so undoing is O(1)); a
// configuration (linearized set, model state) already explored is never
// explored again. What lockproof does beyond that, and why:
//
//   - No boxing: states, inputs and outputs keep their types; Step appends
//     into a reused buffer. Steps allocate only what the model allocates.
//   - States are interned: each distinct state is stored once and the
//     search works on 32-bit state ids, so the memo compares integers and
//     bitsets, and holds no pointers for the garbage collector to scan.
//   - The memo is an open-addressing table over flat arrays (hash, state id,
//     bitset words), keyed by an incremental (Zobrist) hash of the
//     linearized set: linearizing or undoing an operation updates the hash
//     with one XOR instead of rehashing the bitset; a slot holds half of
//     its entry's hash, so a probe reads no other entry and growing the
//     table reads no entry at all. Every operation before
//     the first one not linearized is linearized, and only operations
//     called before that one's return can follow it, so an entry holds only
//     a window of the bitset from there, as wide as the history's overlap
//     needs; the rare sets that do not fit (an unknown operation left
//     pending early) are stored whole in a second table.
//   - Once a search grows past a few thousand configurations, more than two
//     per distinct state, the state ids each (state, operation) steps to
//     are cached, so an expensive Step (an unpartitioned map state) runs
//     once per transition; the cache switches itself off again when most
//     steps are new.
//   - Unknown operations are optional: each is decided when the scan reaches
//     its call (without its effect first, then with it), or left pending to
//     take effect later. States equal to the current one are folded into
//     "without". Deciding early keeps the search from retrying every old
//     unknown operation at every dead end. Porcupine instead needs a return
//     at +infinity and a model that accepts any output.
//   - Leaving an unknown operation pending to the end is the same as
//     deciding it never took effect, so the "without" step is never needed
//     for soundness. Once it has led nowhere from a configuration, the scan
//     skips it below that configuration (where it could only reach explored
//     configurations) and below its siblings (where it mostly fails again).
//     A wider scope makes the lease-lock histories much slower (see
//     searcher.try).
//   - Where splitting unknown operations does not decide a partition
//     quickly (2 steps per operation, plus 64), the search on sets joins
//     in (subset.go): porcupine's power-set construction for any model,
//     a state being the set of the model's states the linearized
//     operations may have led to, an unknown operation stepping to the
//     union of its effect and its absence, and placed only where it
//     changes the set. On a correct lock history with many unknown
//     acquires, every combination of them that took effect is a state of
//     its own for the split search; on sets they are one. But when a
//     violation must be proved, every placement of an unknown acquire is a
//     set of its own, and a step on sets costs a step of the model per
//     member, where the split search is quick. So the two alternate until one decides: after the
//     first round of the split search, the search on sets goes on for
//     twice as many steps as that round took, doubled at each round, and
//     the split search for 8 times as many; each run pauses at its budget
//     and the next goes on from there, so no work is done twice. The
//     first rounds are short: where the split search does not decide a
//     correct history at once it seldom decides it soon, and longer first
//     rounds made lockproof slower than porcupine on some correct lease
//     histories (docs/linearize.md). An Ok witness is
//     picked backwards through the sets (a member each, and whether each
//     unknown operation took effect), so it is a linearization of the
//     model itself. A model may say which unknown calls can never take
//     effect again (the fenced register: a token below the highest
//     admitted); the search on sets settles them at once, so they do not
//     hold back the memo's window.
//   - A third search takes turns with the two, after the search on sets in
//     each round, with 4 times the split search's share of steps (counted in
//     the model's Steps, which its closures take cheaply): the relaxed
//     search (relax.go), which only proves Illegal. It searches on sets of
//     the known operations alone, and before each one closes the set under
//     the unknown operations called by its return, fired in any order,
//     repeats let in: every linearization is one of its paths, so when it
//     finds none the history is Illegal, and it no longer cares which
//     unknown operations took effect. It decides quickly the illegal
//     histories with many unknown operations that the other two search
//     for long (it shrinks what it proves, too).
//   - Read-only operations (Model.ReadOnly: a get, a refused acquire) that
//     succeed are taken greedily: if the configuration after one fails, the
//     configuration before it fails too, so its other candidates are not
//     tried.
//   - A read that names the hash of the states it accepts (Model.ReadHash:
//     a get that returned v, the hash of v) is turned down by comparing
//     that hash with the current state's, without a call to Step: the
//     commonest step of a key-value history.
//   - Partitions run in parallel on a pool of GOMAXPROCS goroutines, the
//     largest first; each worker reuses its tables and buffers from one
//     partition to the next. The caller's goroutine is a worker and starts
//     the others only once the work repays them (a search of 1024 steps,
//     or 4096 configurations in all): a small history needs no goroutine.
//     Searchers are also reused from one Check to the next (a sync.Pool
//     per type, only while their tables hold at most 256 KiB), so a check
//     of a small history allocates a handful of objects besides what the
//     model's steps allocate (TestSmallCheckAllocs).
//     The first Illegal partition stops the others, and no further
//     partition is started.
//   - The budget is checked every 1024 steps: ctx, the time limit and the
//     bytes held by the tables of the searches in flight.
//   - Counterexamples are shrunk within the failing partition: first
//     everything called after the operation the search got stuck at, then
//     whole clients, then chunks of halving size, then single operations to
//     a fixpoint, keeping a removal only if the search still gets stuck at
//     the same operation (see Result.Counterexample for what minimal means).
//   - The lease model orders grants by fencing token (a grant with a token
//     not above the last one fails at once) and tracks the earliest instant
//     a lease may expire, so that a branch relying on an impossible expiry
//     dies in one step.
//   - A model from NewFencedRegisterModel first looks for a Read or Write
//     admitted with a token below that of one admitted and returned before
//     it was called: the highest token only rises, so the two operations
//     are a counterexample without search (confirmed by their own search,
//     which names the Blocker). Otherwise the generic search decides.
//   - A model from NewLeaseModel is decided by a procedure of its own
//     (leasefast.go), as long as its Step is not replaced. First, per lock,
//     the violations a history shows without search: a grant with token 0;
//     a successful release or renewal for an owner no acquire names; a
//     grant whose token is not above that of a grant that returned before
//     it was called; a grant called after another grant returned, that
//     returns before that grant's lease can expire, with no release for the
//     first owner called in between. Each is a proof for the whole history,
//     and its one or two operations, searched alone, are the counterexample
//     and name the Blocker. Then the generic search of the lease model
//     itself, capped at 4 steps per operation (plus 64) and at 256
//     bytes of tables per step (plus 1 MiB: an unknown operation left
//     pending early makes the memo store whole sets): most locks are
//     decided there, a correct history of 100,000 operations in about the
//     time the uncapped search takes. The locks it leaves undecided are
//     searched on the subset construction of the lease model, as
//     porcupine searches every nondeterministic model: a state is the set
//     of lease states the linearized operations may have led to, and an
//     unknown operation steps to the union of its effect and its absence,
//     so it never splits the search in two. Splitting it is what made the search of the lease
//     model itself exponential on histories with many unknown acquires:
//     every combination of them that took effect gives other holders,
//     tokens and expiries, so the memo seldom meets a configuration twice.
//     Two reductions keep the sets small and let the memo meet them: a
//     state dominated by another of the set (same holder, token, expiry
//     and floor no higher) is dropped, and the owners of unknown acquires
//     that no release or renewal names are one anonymous holder (the model
//     compares holders with those owners only). A refused acquire filters a
//     set, and is taken greedily when it leaves the set as it is. Three
//     rules keep unknown operations from being tried where they cannot
//     matter. One is never placed where no member of the set can take
//     its effect: that gives up placing it later for the same set (the
//     search on sets used to, and then backtracked through every later
//     placement). Unknown acquires of the anonymous holder differ only in
//     their call, and the one called first is at least as good wherever
//     it goes (the same token, an expiry no later), so they stay out of
//     the event list and are placed in call order, the next of them as
//     each configuration's last candidate; the memo tells configurations
//     apart by how many are placed. An unknown renewal (the model ignores
//     it) and an unknown release whose owner can never hold the lock
//     again are settled as never taken effect at once, so that they
//     neither pin the memo's window nor lengthen every scan. An Ok
//     witness is a path through the sets, picked backwards, and is replayed
//     on the lease model before it is returned (the generic search of the
//     lease model decides should that replay ever fail).
//
// # Performance
//
// Against porcupine v1.3.1 on the same histories and model semantics
// (bench_test.go; TestLeaseDecidedTable in leasemeasure_test.go), the
// checker aims at no more than a third of porcupine's time and half its
// memory on every row. The measurements, with the commands that take
// them, are in docs/linearize.md.
//
// # Known limits
//
// Linearizability checking is NP-complete: some histories take exponential
// time. On lease histories the search on sets places the unknown acquires
// of owners no release names in call order, but an unknown acquire whose
// owner a release or renewal names (as the suite records a crashed
// acquire: followed by its owner's release of unknown outcome) is still
// tried wherever it is a candidate and changes the set, and a few such
// histories stay Unknown within a short limit. On one long lock the capped search of
// the lease model takes most of the time before it gives way to the
// search on sets. The generic search on sets has neither the lease
// decider's anonymous holder nor its dominance. Its sets are charged to
// Options.MaxMemory at the size of a string header, not of their bytes,
// and the model states they name not at all: on a history whose sets
// grow large the memory cap is reached later than it says. Its rounds
// are counted in steps, not time, so the same history takes the same
// turns and gives the same witness or counterexample in every run, at a
// little speed. Partitions with unknown operations are searched one at a
// time. Histories with many long-running or unknown operations on one key
// are the hard ones; proving such a history Illegal explores every way the
// unknown operations could have taken effect. Set Options.TimeLimit (and
// Options.MaxMemory below its default, DefaultMaxMemory, on a small
// machine): the worst case is then an Unknown verdict.
package linearize
