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
//   - Lock creates its child and lists the children. With none ahead of its
//     own, it holds the lock. Otherwise it watches its immediate predecessor
//     alone (getData with a watch), so a release wakes the next waiter in
//     line and nobody else (no thundering herd), and after every wake-up
//     it lists the children again: the predecessor that went may have been
//     a waiter that gave up. It never polls. A hand-off thus costs the
//     waiter one listing. A waiter that gives up (ctx, wait
//     budget) deletes its child before Lock returns; should that delete be
//     lost with the connection, or its reply come late, it is sent again in
//     the background until the child is gone or its session is, as is every
//     clean-up of a child (a refused TryLock's, a create's cut off, an ended
//     lease's): go-zookeeper reconnects with the same session, which would
//     otherwise keep the child, ahead of every later contender, for as long
//     as the process lives.
//   - TryLock lists the children and gives up at once if there is a
//     contender; otherwise it creates its child and, should another have
//     come first meanwhile, deletes it again: a refused TryLock leaves
//     nothing behind.
//   - Unlock deletes the child, version-checked.
//
// Protected names: a create whose reply is lost (the connection dropped
// after the request went out) may or may not have made the child. The GUID
// in the name (as in Curator's protected mode) lets the contender list the
// children after reconnecting and adopt its child if it is there, or create
// it again if not; a create still in flight when its caller gives up deletes
// its child once it lands. An unrecognisable child would stay, ahead of
// every later contender, for as long as the session lives.
//
// Fencing token: a mutex's is the pzxid of the listing that granted it
// (the zxid of the last creation or deletion of one of the lock node's
// children), whoever listed and however its child came to be. Zxids are
// the ensemble's single, strictly increasing transaction counter. A
// listing grants a mutex's contender only when no child is ahead of its
// own, so the earlier holder's child, which was there when its own
// granting listing ran and is ahead of this contender's (this child was
// behind it then, or made later), had been deleted by then: that listing, the
// deletion and this one come in that order, each deletion raises the
// pzxid, and each holder's token is above every earlier holder's. (Not so
// the czxid: a waiter's child is older than the listing that granted the
// holder ahead of it.) Any other holder's token (a semaphore's, a
// read-write mutex's) is its child's czxid: a contender holds only once
// the children created before its own are gone (for a reader, the
// writers'), so each holder's czxid is above every earlier holder's that
// excludes it. Such a contender whose listing finds its child the lock
// node's only child (the lock is free, nobody waits) takes instead, as a
// mutex's does, the pzxid that listing returned: its own child's czxid
// unless a child older than its own went since. That is as safe: every
// earlier holder's token is below the zxid that deleted its child (its
// czxid, or a pzxid it listed while its child was there), and that
// deletion came before this listing, which no longer shows the child;
// every later holder's token is above the pzxid (a czxid of a child
// created after this listing, which did not show it, or a pzxid listed
// after this child's deletion); and while this contender holds, no other
// child was there to hold beside it when it listed, so no semaphore
// permit or reader shares its token. A lease whose token is a pzxid
// learns the czxid at its first read of its child (the watch below),
// which must not be above the token. Before this rule a waiter's mutex
// token was its child's czxid, which may be below the pzxid token of the
// holder it waited for: clients of one lock must all take tokens by the
// same rule, so upgrade them together.
//
// The lease (a locks.ManagedLease) is the ZooKeeper session: ephemeral
// children live exactly as long as the session that made them. The server
// expires a session once it has heard nothing from it for the session
// timeout, so a request that succeeded proves the session will live at least
// the timeout from the moment the request was sent. Hence the TTL
// (locks.WithTTL) is the session timeout the server granted the connection,
// or less, and Done closes at the first of:
//
//   - the node is deleted by someone else, or the session expires or the
//     connection is closed: a watch says so at once, and Err wraps
//     locks.ErrNotHeld (and ErrSessionLost for the session). For a
//     mutex's holder, and any holder that found its node alone, it is the
//     watch on the lock node's children that the granting listing set,
//     then, from their first change, one on the node; for a semaphore's
//     or read-write mutex's waiter, the watch on its node it set while it
//     waited;
//   - the lease cannot be trusted any more: no round trip has proved the
//     session alive and the node ours (the listing that granted the lock,
//     with the node in it and the connection on the node's session when
//     its reply came; then each renewal: one exists request) for
//     TTL − locks.Drift(TTL), measured on the Locker's clock from the
//     moment the request was sent. The watchdog
//     proves it every TTL/3 and gives up, closing Done with
//     locks.ErrLeaseExpired, once less than the request timeout is left. So
//     a connection that goes down ends the lease between 2/3 of the TTL
//     and the whole TTL after it went down (less the drift allowance and
//     the request timeout), always before the server may expire the
//     session.
//
// Why not the rule "lost once disconnected for longer than 2/3 of the
// session timeout", measured from the moment the client sees the connection
// drop: go-zookeeper notices a silently dead connection only when nothing
// has come from the server for 2/3 of the session timeout, so the drop is
// seen up to that late, and the server may expire the session the full
// timeout after it last heard from the client: a rule counted from the drop
// as seen could trust a session 4/3 of the timeout after its last sign of
// life. Counting from the last proof is safe whatever the detection delay;
// besides, the connection's state events go to the channel zk.Connect
// returned, which belongs to the caller.
//
// Session expiry: go-zookeeper learns of it when it reconnects, then goes on
// with a new session. The holder's lease ends (the watch on its node is
// dropped with zk.ErrSessionExpired, and a renewal finds the connection on
// another session); by then the server has deleted the child and the next
// waiter holds the lock. A waiter whose session expired queues again with a
// new child, at the back. A lease that ends for any reason but Unlock
// deletes its child if it is still there (without the watchdog a lease
// lives one TTL, and the session would otherwise keep the lock from the
// others for as long as the connection lives); call Unlock all the same.
//
// Compared with go-zookeeper's own zk.Lock (which uses the same names, so
// the two exclude each other on one node): zk.Lock gives no fencing token,
// no lease (nothing tells its holder that its session expired or its node
// went), no way to stop waiting (no context), and no TryLock; and its
// protected create (CreateProtectedEphemeralSequential) looks for its GUID
// only after zk.ErrConnectionClosed, up to three tries, and returns the error
// of a failed look-up as is, leaving any child it made to stand ahead of
// every later contender until the session ends.
//
// What an acquisition sends, release included, and what each costs: on a
// free lock, the create, one listing (which grants; its watch on the
// children serves the lease) and the delete, as zk.Lock, plus one watch
// event, that watch firing at the delete. A mutex's waiter (a semaphore of
// one permit's too) sends the
// create, a listing, the watch on its predecessor (whose event wakes it),
// one listing per wake-up, which grants with no further request (the
// re-check zk.Lock makes too; it sets the watch on the children the lease
// keeps), and the delete, as zk.Lock: five requests a hand-off. Its
// watch fires at the delete, the second event of a hand-off, the price
// of a lease told at once that its node went: on minizk, about half of
// the time a hand-off takes beyond zk.Lock's. Should the children change
// while it holds (a contender comes or goes), the lease's monitor sends
// one getData more, a watch on its node, which fires at the delete in
// place of the children's. A semaphore's or read-write mutex's waiter
// reads its own node with a watch while it waits (the czxid, its token,
// and the lease's watch): one request more. The watchdog adds an exists
// every TTL/3 of holding. Each request is one round trip and one
// short-lived goroutine (see below); nothing else goes to the server. That
// goroutine, which lets an operation return at its request timeout, costs
// a hand-off two switches between goroutines for each of the two requests
// on its path (the delete, the waiter's listing): on minizk, the other
// half. The lease's monitor goroutine costs nothing measurable.
//
// Requests: every request made on behalf of an operation passes the
// locks.Gate of the operation's context as "zk <op>" (create, getChildren,
// getData, exists, delete): go-zookeeper has no hook, so the lock gates its
// own requests. go-zookeeper's calls take no context; each runs in a
// goroutine of its own (the create on a ctx that cannot end, such as
// context.Background(), on the caller's: only its reply could end the
// wait), and the operation returns as soon as its ctx (or the
// request timeout, locks.WithRequestTimeout, for every request but the
// create of a child: a pooled wall-clock timer, none when ctx ends sooner)
// ends, while the call finishes in the background
// (go-zookeeper fails every request in bounded time once its connection is
// lost, and all of them when the connection is closed). Transient failures
// (connection lost, no server, request timeout) are retried after a short,
// growing, jittered pause (Options.Jitter) on the Locker's clock while ctx
// and the wait budget last. Reads are not synced (no sync request): on an
// ensemble, a follower behind the leader may show a deleted node a little
// longer, which delays a hand-off but never grants two holders, as a node
// that exists on a follower has not been deleted on it.
//
// The semaphore (NewSemaphore, the idea of Curator's
// InterProcessSemaphoreV2 without its lease nodes) is the same queue in
// which the first N children hold: a waiter watches each of the N
// children just ahead of its own (not only the one N places ahead, which
// left it waiting with a permit free when a later holder released first),
// so a release wakes at most N waiters, and a TryLock is refused when N
// children are there. Tokens are czxids (see "Fencing token"); a
// semaphore of one permit is a mutex, tokens and requests alike. A child
// created earlier may be granted later than one behind it (its Lock listed
// the children later), with a smaller token; its call began before the
// other's child existed, so the grants still linearize in
// token order, which the suite's semaphore model checks. Its nodes live
// under DefaultSemaphorePrefix, apart from the mutexes'.
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
