// Package minizk is an in-process ZooKeeper server that speaks the real
// client wire protocol over TCP: enough of ZooKeeper 3.8 for
// github.com/go-zookeeper/zk, and the locks and recipes built on it, to run
// unchanged against a server that starts in well under a millisecond and
// whose time is an input.
//
// Start a Server with Start (127.0.0.1, a port chosen by the kernel) and
// give its Addr to zk.Connect. In tests, zkfake.New does that, cleans
// up, and switches to a real server when LOCKPROOF_ZK_ADDR is set.
//
// go-zookeeper's own integration tests pass on it, and side by side on a
// real ZooKeeper, but for those that start an ensemble (tools/peersuites).
// What it serves, checked against ZooKeeper 3.8 byte for byte (zxids,
// stats, error codes, the order of notifications and replies) by the
// differential tests, which run when LOCKPROOF_ZK_ADDR names a real server:
//
//   - The handshake: the session timeout clamped to [2, 20] ticks (tickTime
//     2s by default, WithTickTime), session ids laid out as ZooKeeper's (the
//     server id 1 in the top byte), passwords as ZooKeeper derives them. A
//     reconnect with the session's id and password resumes it (and closes
//     the session's previous connection); a wrong password, an unknown or
//     an expired session gets timeout 0 and session 0 and the connection
//     is closed; a client that has seen a later zxid than the server's is
//     refused by closing the connection.
//   - create (persistent, ephemeral, sequential, ephemeral-sequential, and
//     container, by its flag or by createContainer), create2, delete,
//     exists, getData, setData, getChildren, getChildren2, getACL, setACL, check, multi, sync, ping, closeSession,
//     setWatches (a reconnecting client's watches), addAuth (digest and ip
//     accept anything, other schemes fail and close the connection), and
//     createTTL with WithExtendedTypes (UNIMPLEMENTED without, as on
//     ZooKeeper without zookeeper.extendedTypesEnabled).
//   - ACLs, enforced as ZooKeeper does: READ for getData and getChildren,
//     READ or ADMIN for getACL, CREATE and DELETE on the parent, WRITE for
//     setData, ADMIN for setACL, READ for a multi's check; NOAUTH
//     otherwise. A connection is its client's ip and every digest user it
//     added; "auth" entries become its digest users (INVALIDACL if none);
//     WithSuperDigest names a super user who passes every check. getACL
//     shows a reader without ADMIN each digest as "user:x".
//   - The four-letter words ruok, srvr, stat, mntr and conf on the client
//     port (as ZooKeeper with them whitelisted); srvr's build date is in
//     the layout go-zookeeper's FLWSrvr parses, and latencies are 0.
//   - Sequential names carry the parent's count of child creates, %010d;
//     Stat.Cversion is reported as ZooKeeper reports it (twice the creates
//     minus the children left, so creates and deletes both count).
//   - zxids: every write takes one, failed ones included (ZooKeeper logs an
//     error transaction), as do session creation and close; reads answer
//     with the last zxid.
//   - Watches: data watches (getData, exists on a node), exists watches
//     (exists on a missing node), child watches; one-shot, per connection,
//     delivered as notifications (xid -1, zxid -1) queued before the reply
//     of the request that fired them. NodeDeleted fires a node's data and
//     child watches, once each connection.
//   - multi: all or nothing at one zxid; on failure every result is an
//     error result (0 before the failing op, its code, then
//     RUNTIMEINCONSISTENCY) and the reply header says OK.
//   - Malformed input never panics: a length prefix below 1 or above
//     jute.maxbuffer (0xfffff), a short header or a bad connect request
//     close the connection; a body that does not decode is answered with
//     MARSHALLINGERROR (a write still takes its zxid); an unknown opcode
//     gets UNIMPLEMENTED and the connection is closed; an invalid path gets
//     BADARGUMENTS, or NONODE where ZooKeeper looks the node up first.
//
// Sessions expire when nothing was heard from them for their negotiated
// timeout on the Server's clock (WithClock; a manual clock in tests, moved
// with Advance): their ephemerals are deleted, the watches on them fire,
// and their connection is closed, so the client learns of the expiry when
// it reconnects. ZooKeeper expires sessions in tick-sized buckets, up to a
// tick late; minizk expires them exactly at their timeout.
//
// Controls for tests: ExpireSession, DropConnections and DropSession (the
// client reconnects and keeps its session), Pause and Resume (the server
// stops answering, connections stay open), Restart (with or without its
// data), Advance, Sessions, SessionTimeout, Get, Children, Watches, Zxid,
// and WaitFor to wait for a condition on the server's state.
//
// Down and Up stop and start the server with its data kept, as a process
// stopped and started again (the sessions do not expire while it is down).
// Reap runs one pass of ZooKeeper's container manager: it deletes the
// containers whose children are all gone and the childless TTL nodes
// unchanged for longer than their TTL; ZooKeeper runs it every minute,
// minizk only when asked.
//
// Not modelled: no SASL, no quotas, no container manager of its own (see
// Reap), no persistent or recursive watches (addWatch, setWatches2), no
// multiRead, getEphemerals, getAllChildrenNumber, whoAmI, removeWatches or
// reconfig (those known opcodes get UNIMPLEMENTED and the connection stays
// open), no other four-letter words (ZooKeeper's others are answered as
// not whitelisted), no
// read-only mode, no chroot (that is the client's), no quorum: one server,
// every read is up to date.
package minizk
