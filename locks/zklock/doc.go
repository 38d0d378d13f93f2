// Package zklock is a fenced lock on a ZooKeeper ensemble, built on
// github.com/go-zookeeper/zk: the classic recipe of ephemeral sequential
// nodes, with protected names, a fencing token and a lease.
//
// One lock is one node, <prefix>/<name> (New; DefaultPrefix "/lockproof"),
// created as a container where missing (the server deletes it some time
// after its last child goes; ZooKeeper 3.5.3 or later). Each Lock or
// TryLock call creates a child of its own, ephemeral and sequential, named
// "_c_<GUID>-lock-" and the sequence number the server appends. The child
// with the lowest sequence number holds the lock.
//
//   - Lock creates its child and lists the children. With none ahead, it
//     holds the lock; otherwise it watches its immediate predecessor alone
//     (no thundering herd) and lists again after every wake-up (the
//     predecessor may have been a waiter that gave up). It never polls. A
//     waiter that gives up deletes its child before Lock returns; that
//     delete, like every clean-up of a child, is resent in the background
//     until the child or its session is gone, since go-zookeeper reconnects
//     with the same session, which would keep the child ahead of everyone.
//   - TryLock lists the children and gives up at once if there is a
//     contender; otherwise it creates its child and, should another have
//     come first meanwhile, deletes it again: a refused TryLock leaves
//     nothing behind.
//   - Unlock deletes the child, version-checked.
//
// Protected names: a create whose reply is lost may or may not have made
// the child. The GUID in the name (as in Curator's protected mode) lets the
// contender find and adopt its child after reconnecting, or create it
// again; a create landing after its caller gave up deletes its child.
//
// Fencing token: a mutex's is the pzxid of the listing that granted it
// (the zxid of the last creation or deletion of a child), whoever listed.
// Zxids are the ensemble's strictly increasing transaction counter. A
// listing grants only when no child is ahead, so the earlier holder's
// child, present at its own granting listing and ahead of this one's, was
// deleted in between: that listing, the deletion and this listing come in
// order, each deletion raises the pzxid, so each token is above every
// earlier holder's. (Not so the czxid: a waiter's child is older than the
// listing that granted the holder ahead of it.) Any other holder's token (a
// semaphore's, a read-write mutex's) is its child's czxid: it holds only
// once the children created before its own (for a reader, the writers')
// are gone, so its czxid is above every earlier excluding holder's. Such a
// contender whose listing finds its child alone takes the listing's pzxid
// instead, as safe: every earlier holder's token is below the zxid that
// deleted its child, which came before this listing; every later holder's
// is above it (a czxid created after this listing, or a pzxid listed after
// this child's deletion); and no other child was there to share its token.
// Such a lease checks at its first read of its child that the czxid is not
// above the token. Clients of one lock must all take tokens by the same
// rule, so upgrade them together.
//
// The lease (a locks.ManagedLease) is the ZooKeeper session, which
// ephemeral children live exactly as long as. The server expires a session
// it has not heard from for the session timeout, so a successful request
// proves the session lives at least the timeout from when it was sent.
// Hence the TTL is at most the granted session timeout, and Done closes at
// the first of:
//
//   - the node deleted by someone else, the session expired or the
//     connection closed: a watch says so at once, and Err wraps
//     locks.ErrNotHeld (and ErrSessionLost). The watch is the granting
//     listing's on the children, then one on the node (for a semaphore's
//     or read-write waiter, the one on its node set while waiting);
//   - no round trip (the granting listing, then each renewal's exists) has
//     proved the session alive and the node ours for TTL − locks.Drift(TTL),
//     on the Locker's clock from when the request was sent. The watchdog
//     proves it every TTL/3 and closes Done with locks.ErrLeaseExpired
//     once less than the request timeout is left, so a dead connection
//     ends the lease before the server may expire the session.
//
// Why not "lost once disconnected for 2/3 of the session timeout":
// go-zookeeper sees a silently dead connection only after 2/3 of the
// timeout without traffic, and the server may expire the session the full
// timeout after it last heard from the client, so a rule counted from the
// drop as seen could trust a session 4/3 of the timeout after its last
// sign of life. Counting from the last proof is safe whatever the delay.
//
// Session expiry: go-zookeeper learns of it on reconnecting and goes on
// with a new session; the holder's lease ends, and the server has deleted
// its child. A waiter whose session expired queues again at the back. A
// lease ending but by Unlock deletes its child if still there; call Unlock
// all the same.
//
// The connection is the caller's. Give zk.Connect
// zk.WithDialer(HandshakeDialer(nil, HandshakeBound(sessionTimeout))):
// go-zookeeper waits 6⅔ session timeouts for a server to answer its
// connect request, and a paused or stalled server (a leader stopped while
// the rest of the ensemble elects another) accepts connections without
// answering, so every request would time out for several TTLs.
//
// Compared with go-zookeeper's zk.Lock (same names, so the two exclude
// each other): zk.Lock has no fencing token, no lease, no context, no
// TryLock, and its protected create looks for its GUID only after
// zk.ErrConnectionClosed, leaving a child it made ahead of everyone.
//
// Requests per acquisition, release included: on a free lock the create,
// one listing (its children watch serves the lease) and the delete, as
// zk.Lock, plus one watch event at the delete. A mutex's waiter sends the
// create, a listing, a watch on its predecessor, one granting listing per
// wake-up and the delete, as zk.Lock: five a hand-off, the second event
// being the lease's watch. If the children change while it holds, the
// monitor sends one getData more to watch its node instead. A semaphore's
// or read-write waiter reads its node with a watch while waiting: one
// more. The watchdog adds an exists every TTL/3. Each request is one round
// trip and one short-lived goroutine; nothing else goes to the server. On
// minizk a hand-off takes about a tenth longer than zk.Lock's
// (docs/measurements.md). The lease's watch event is the price of a lease
// told at once that its node went: any watch that sees the node deleted
// fires at the holder's own delete too. It is about half the gap: a build
// without any watch on the lease made 0.96 of zk.Lock's acquisitions a
// second, against 0.90 as shipped. The goroutine per request, the
// price of returning at ctx's end or the request timeout, was within the
// noise of a shared machine: running every request on the caller moved
// the paired hand-off ratios by 0.02 to 0.13, inside the runs' spread.
//
// Requests: every request made for an operation passes the locks.Gate of
// its context as "zk <op>" (create, getChildren, getData, exists, delete),
// since go-zookeeper has no hook. go-zookeeper's calls take no context, so
// each runs in a goroutine (a create on a ctx that cannot end, such as
// context.Background(), on the caller's) and the operation returns when
// ctx or the request timeout (locks.WithRequestTimeout; not for a child's
// create) ends, the call finishing in the background in bounded time.
// Transient failures are retried after a short, growing, jittered pause
// (Options.Jitter) on the Locker's clock while ctx and the wait budget
// last. Reads are not synced: a lagging follower may show a deleted node
// longer, which delays a hand-off but never grants two holders.
//
// The semaphore (NewSemaphore, after Curator's InterProcessSemaphoreV2
// without lease nodes) is the same queue in which the first N children
// hold; a waiter watches each of the N children just ahead of its own, so
// a release wakes at most N waiters, and TryLock is refused when N
// children are there. Tokens are czxids; one permit is a mutex. A child
// created earlier may be granted later with a smaller token, but its call
// began before the other's child existed, so grants still linearize in
// token order. Its nodes live under DefaultSemaphorePrefix.
//
// The read-write mutex (NewRWMutex, the shape of Curator's
// InterProcessReadWriteLock) is the same queue with two kinds of children,
// "_c_<GUID>-__READ__<sequence>" and "_c_<GUID>-__WRIT__<sequence>", ordered
// by the sequence number alone: a reader holds once no writer's child is
// ahead of its own and watches the newest such writer's alone; a writer
// holds at the head of the queue and watches the child just ahead of it. So
// readers who come after a waiting writer wait behind it (writers are not
// starved), and a release wakes only the waiters it may let in. Its views,
// RLocker and Locker, are Lockers as New's, leases and tokens included. Its
// nodes live under DefaultRWPrefix.
package zklock
